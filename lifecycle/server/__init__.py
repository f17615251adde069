"""The HTTP side: what real clients send and receive (validation, wire renderings, responses, SSE)."""
