"""Command line: trace one prompt through every stage, or tokenize text with any tokenizer.

    python -m lifecycle trace "Why is the sky blue?" --temperature 0 --max-tokens 24
    python -m lifecycle tokenize --encoding o200k_base "naïve café 🙂"
    python -m lifecycle keys --count 30
    python -m lifecycle warm prompts.txt --url http://localhost:8501 --api-key sk-...

Bad input exits with status 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from lifecycle.errors import LifecycleError
from lifecycle.lessons.words import counted
from lifecycle.stages.tokenization import ENCODINGS, MODEL_ENCODING
from lifecycle.stages.vocabulary import show_token

TOP_CANDIDATES = 10
URL_ENV, KEY_ENV = "LIFECYCLE_URL", "LIFECYCLE_API_KEY"
DEFAULT_URL = "http://localhost:8501"
# The flags of trace and warm that set the generation, in --help order, each with its value's type.
GENERATION_FLAGS = {"temperature": float, "top_p": float, "top_k": int, "min_p": float, "repetition_penalty": float,
                    "max_tokens": int, "seed": int}
TRACE_TEMPERATURE = 0.7  # trace's one default of its own; the others are the sampling stage's and the journey's


class _OneLineParser(argparse.ArgumentParser):
    """Usage mistakes end like every other bad input: one line on stderr, exit status 2."""

    def error(self, message: str) -> None:
        self.exit(2, f"error: {message} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="python -m lifecycle", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    trace = commands.add_parser("trace", help="run one prompt through every stage on the real model")
    trace.add_argument("prompt")
    trace.add_argument("--system", default=None, help="system prompt (default: the chat template's own)")
    trace.add_argument("--raw", action="store_true", help="plain completion of the prompt, no chat template")
    _add_generation_flags(trace)
    trace.add_argument("--json", action="store_true", help="print one JSON object instead of a summary")
    tok = commands.add_parser("tokenize", help="split text into tokens: ids, text and bytes")
    tok.add_argument("text")
    tok.add_argument("--encoding", default=MODEL_ENCODING, help=f"one of {', '.join(ENCODINGS)}")
    tok.add_argument("--json", action="store_true")
    keys = commands.add_parser("keys", help="print a key sheet for a workshop: one named API key per participant")
    keys.add_argument("--count", type=int, default=30, help="participants (one key each)")
    keys.add_argument("--prefix", default="participant", help="participant key names: PREFIX01, PREFIX02, ...")
    warm = commands.add_parser("warm", help="precompute a class's prompts on the running server (one per line)")
    warm.add_argument("prompts", help="a text file, one prompt per line (# comments and blank lines skipped)")
    warm.add_argument("--url", default=os.environ.get(URL_ENV, DEFAULT_URL),
                      help=f"the running app (default ${URL_ENV} or {DEFAULT_URL})")
    warm.add_argument("--api-key", default=os.environ.get(KEY_ENV),
                      help=f"one of the server's API keys (default ${KEY_ENV})")
    _add_generation_flags(warm, "as in the sidebar (default: the pages' default)")
    warm.add_argument("--system", default=None, help="system prompt (default: none, as in the sidebar)")
    warm.add_argument("--journey-only", action="store_true",
                      help="warm the journey's stages only, not the work some pages do of their own (the Agents "
                           "page's loop and measurements, the KV cache page's turns, ...): several times faster")
    return parser


def _add_generation_flags(command: argparse.ArgumentParser, help: str | None = None) -> None:
    """--temperature, --top-p, ... --seed; one not given is None, so the command picks its default."""
    for name, kind in GENERATION_FLAGS.items():
        command.add_argument(f"--{name.replace('_', '-')}", type=kind, default=None, help=help)


def _generation_flags(args: argparse.Namespace) -> dict[str, int | float]:
    """The generation flags given on the command line, by setting name."""
    return {name: getattr(args, name) for name in GENERATION_FLAGS if getattr(args, name) is not None}


def _keys(args: argparse.Namespace) -> str:
    """A sheet to cut into slips, then the same keys for LIFECYCLE_API_KEYS and for secrets.toml."""
    from lifecycle.api.config import ADMIN_KEYS_ENV
    from lifecycle.api.keys import KEYS_ENV, key_sheet

    sheet = key_sheet(args.count, args.prefix)
    admin = next(iter(sheet))
    joined = ",".join(f"{name}:{secret}" for name, secret in sheet.items())
    width = max(len(name) for name in sheet)
    slips = [f"{name:<{width}}  {secret}" for name, secret in sheet.items()]
    return "\n".join([
        f"# Key sheet: {args.count} participant keys and one operator key ({admin!r} sees every call).",
        "# Hand out one line per person; keep the operator key to yourself.",
        *slips,
        "",
        "# For the environment (shell):",
        f"export {KEYS_ENV}='{joined}'",
        f"export {ADMIN_KEYS_ENV}='{admin}'",
        "",
        "# For .streamlit/secrets.toml (Streamlit Community Cloud: the app's Secrets box):",
        f'{KEYS_ENV} = "{joined}"',
        f'{ADMIN_KEYS_ENV} = "{admin}"',
    ])



def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        commands = {"trace": _trace, "tokenize": _tokenize, "keys": _keys, "warm": _warm}
        output = commands[args.command](args)
    except LifecycleError as error:
        print(f"error: {error.message}", file=sys.stderr)
        return 2
    print(output)
    return 0


def _tokenize(args: argparse.Namespace) -> str:
    from lifecycle.stages.tokenization import tokenize

    result = tokenize(args.text, args.encoding)
    rows = [{"id": t.id, "text": t.text, "bytes": t.bytes.hex(" "), "special": t.special} for t in result.tokens]
    if args.json:
        return json.dumps({"encoding": result.encoding, "count": result.count, "tokens": rows}, ensure_ascii=False)
    lines = [f"{result.count} tokens ({args.encoding}), {result.chars_per_token:.2f} characters per token"]
    lines += [f"{row['id']:>7}  {row['text']!r:<24} {row['bytes']}" for row in rows]
    return "\n".join(lines)


def _warm(args: argparse.Namespace) -> str:
    """Warm the prompts on the server, printing a line as each one is ready; return the summary."""
    from lifecycle.api.warm import read_prompts, warm_server

    prompts = read_prompts(args.prompts)
    settings = _generation_flags(args)
    if args.system is not None:
        settings["system_prompt"] = args.system
    print(f"Warming {counted(len(prompts), 'prompt')} on {args.url} …", flush=True)
    summary, failed = None, 0
    for line in warm_server(args.url, args.api_key, prompts, settings, pages=not args.journey_only):
        if line.get("done"):
            summary = line
            continue
        prompt = prompts[line["index"]]
        shown = repr(prompt if len(prompt) <= 50 else prompt[:49] + "…")
        if line["status"] == "ready":
            how = "was already cached" if line["already_cached"] else f"{line['journey_seconds']:.1f} s"
            pages = f"; {len(line['pages'])} pages' own work, {line['seconds']:.1f} s in all" if line["pages"] else ""
            print(f"  ready   {shown}: {line['prompt_tokens']} prompt + {line['completion_tokens']} "
                  f"generated tokens, {how}{pages}", flush=True)
        else:
            failed += 1
            print(f"  failed  {shown}: {line['error']}", flush=True)
    if summary is None:
        raise LifecycleError("The server stopped before reporting every prompt.", param="url")
    if failed:
        raise LifecycleError(f"{failed} of {counted(len(prompts), 'prompt')} could not be warmed (see above).",
                             param="prompts")
    return f"{counted(summary['ready'], 'prompt')} ready in {summary['seconds']:.1f} s: the class's pages open at once."


def _trace(args: argparse.Namespace) -> str:
    from lifecycle.journey import JourneyInput, run_journey
    from lifecycle.stages.sampling import SamplingSettings

    given = _generation_flags(args)
    max_tokens = given.pop("max_tokens", JourneyInput.max_tokens)
    sampling = SamplingSettings(**{"temperature": TRACE_TEMPERATURE, **given})
    journey = run_journey(
        JourneyInput(args.prompt, system=args.system, raw=args.raw, sampling=sampling, max_tokens=max_tokens)
    )
    report = journey_report(journey)
    return json.dumps(report, ensure_ascii=False, indent=1) if args.json else _summary(journey)


def journey_report(journey) -> dict:
    """The journey as one JSON-ready object (what ``trace --json`` prints)."""
    gen = journey.generation
    return {
        "request": journey.request.to_payload(),
        "tokens": [
            {"id": t.id, "text": t.text, "bytes": t.bytes.hex(), "start": t.start, "end": t.end}
            for t in journey.prompt_tokens.tokens
        ],
        "context": {
            "prompt": journey.rendered.text,
            "prompt_tokens": journey.budget.prompt_tokens,
            "window": journey.budget.window,
            "output_reserve": journey.budget.output_reserve,
            "free": journey.budget.free,
            "segments": [{"name": s.name, "tokens": s.tokens} for s in journey.budget.segments],
        },
        "next_token": {
            "entropy_bits": journey.next_token.entropy_bits,
            "top": [
                {"id": c.id, "text": c.text, "probability": c.probability, "logprob": c.logprob}
                for c in journey.next_token.top(TOP_CANDIDATES)
            ],
        },
        "steps": [
            {
                "index": s.index,
                "id": s.token_id,
                "text": s.text,
                "probability": s.probability,
                "seconds": s.seconds,
                "alternatives": [{"id": a.id, "text": a.text, "probability": a.probability} for a in s.alternatives],
            }
            for s in gen.steps
        ],
        "stream": [{"at": e.at, "data": e.data} for e in journey.stream],
        "response": journey.response,
        "timings": {
            "stages": [{"stage": t.stage, "seconds": t.seconds} for t in journey.timings],
            "prefill_seconds": gen.prefill_seconds,
            "decode_seconds": gen.decode_seconds,
            "ttft_seconds": journey.stream_metrics.ttft,
            "tokens_per_second": journey.stream_metrics.tokens_per_second,
        },
    }


def _summary(journey) -> str:
    gen, budget, metrics = journey.generation, journey.budget, journey.stream_metrics
    top = ", ".join(f"{show_token(c.text)} {c.probability:.1%}" for c in journey.next_token.top(5))
    usage = journey.response["usage"]
    return "\n".join(
        [
            f"model        {journey.model_name}",
            f"tokenization {journey.prompt_tokens.count} tokens in the prompt text",
            f"context      {budget.prompt_tokens} prompt tokens of a {budget.window:,}-token window "
            f"(+{budget.output_reserve} reserved for the answer)",
            f"next token   {top}  (entropy {journey.next_token.entropy_bits:.2f} bits)",
            f"generation   {gen.completion_tokens} tokens, finish_reason={gen.finish_reason}",
            f"timing       prefill {gen.prefill_seconds * 1000:.0f} ms, TTFT {metrics.ttft * 1000:.0f} ms, "
            f"{metrics.tokens_per_second:.1f} tokens/s",
            f"usage        prompt {usage['prompt_tokens']} + completion {usage['completion_tokens']} "
            f"= {usage['total_tokens']}",
            f"id           {journey.response['id']}",
            "",
            journey.generation.text,
        ]
    )
