"""Failures, retries and fallbacks: the call as a request to an unreliable remote service.

``plan`` says which fault a visitor's gateway injects and for how long, ``gateway`` serves those
faults over a real loopback socket in front of the visitor's own demo gateway and records every
attempt it receives, and ``client`` lets the official openai SDK live through them.
"""
