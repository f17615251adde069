"""``python -m lifecycle``: the trace and tokenize commands, and their one-line errors."""

import json
import subprocess
import sys

from lifecycle.cli import main
from lifecycle.stages.tokenization import decode, tokenize


def test_trace_json_has_every_stage_and_a_chat_completion_response(loaded, capsys):
    assert main(["trace", "Say hi.", "--temperature", "0", "--max-tokens", "6", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    for key in ("request", "tokens", "context", "next_token", "steps", "stream", "response", "timings"):
        assert key in report
    response = report["response"]
    assert response["object"] == "chat.completion" and response["id"].startswith("chatcmpl-")
    assert response["choices"][0]["message"]["content"] == "".join(
        chunk["data"]["choices"][0]["delta"].get("content", "")
        for chunk in report["stream"]
        if chunk["data"] and chunk["data"]["choices"]
    )
    assert response["choices"][0]["finish_reason"] in ("stop", "length")
    assert response["usage"]["completion_tokens"] == len(report["steps"]) <= 6
    assert report["request"]["messages"][-1] == {"role": "user", "content": "Say hi."}
    assert [t["id"] for t in report["tokens"]] == tokenize("Say hi.").ids
    top = report["next_token"]["top"]
    assert top[0]["probability"] >= top[1]["probability"] > 0 and isinstance(top[0]["text"], str)


def test_trace_raw_sends_the_prompt_without_the_template(loaded, capsys):
    assert main(["trace", "The capital of France is", "--raw", "--temperature", "0", "--max-tokens", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["context"]["prompt"] == "The capital of France is"
    assert report["steps"][0]["text"] == " Paris"


def test_tokenize_json_round_trips_for_each_encoding(capsys):
    text = "naïve 🙂 <|endoftext|>"
    for encoding in ("o200k_base", "cl100k_base", "model"):
        assert main(["tokenize", "--encoding", encoding, text, "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        ids = [t["id"] for t in report["tokens"]]
        assert report["count"] == len(ids) and decode(ids, encoding) == text
        assert b"".join(bytes.fromhex(t["bytes"]) for t in report["tokens"]) == text.encode()


def test_bad_input_exits_non_zero_with_one_line_and_no_traceback():
    cases = [
        ["trace", ""],
        ["trace", "hi", "--temperature", "3"],
        ["trace", "hi", "--top-p", "hot"],
        ["tokenize", "--encoding", "nope", "hi"],
    ]
    for args in cases:
        done = subprocess.run(
            [sys.executable, "-m", "lifecycle", *args], capture_output=True, text=True, timeout=120,
            env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
        )
        assert done.returncode == 2, args
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, done.stderr)
        assert "Traceback" not in done.stderr


def test_keys_prints_a_sheet_the_server_accepts(capsys):
    from lifecycle.api.config import api_config

    assert main(["keys", "--count", "30"]) == 0
    sheet = capsys.readouterr().out
    exported = next(line for line in sheet.splitlines() if line.startswith("export LIFECYCLE_API_KEYS="))
    toml = next(line for line in sheet.splitlines() if line.startswith("LIFECYCLE_API_KEYS = "))
    value = exported.split("=", 1)[1].strip("'")
    assert toml == f'LIFECYCLE_API_KEYS = "{value}"'
    config = api_config({}, environ={"LIFECYCLE_API_KEYS": value, "LIFECYCLE_ADMIN_KEYS": "admin"})
    assert list(config.keys) == ["admin"] + [f"participant{n:02d}" for n in range(1, 31)]
    assert len(set(config.keys.values())) == 31 and config.is_admin("admin") and not config.is_admin("participant01")
    slips = [line.split() for line in sheet.splitlines() if line.startswith("participant")]
    assert {name: key for name, key in slips} == {n: k for n, k in config.keys.items() if n != "admin"}
    assert main(["keys", "--count", "0"]) == 2
