"""What the app builds on the stages: tools, grammar-constrained output, the agent loop, injection and
guardrails measured, temperature 0's roads, the guessing game, the handout, multi-turn chats, and the
sentences the pages state (lessons, agent_lessons, call_timeline).
"""
