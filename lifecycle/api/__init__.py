"""The HTTP side: routes, validation, the gateway (keys, rate limits, model routing, call log),
admission in front of the engine (serving), the worker, responses and SSE, warming a class, and
outbound calls to another server."""
