"""The HTTP side: routes, the gateway (keys, rate limits, routing, call log), the worker, outbound calls."""
