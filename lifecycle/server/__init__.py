"""The HTTP side: routes, validation, the gateway (keys, rate limits, routing, call log), the worker,
responses and SSE, outbound calls."""
