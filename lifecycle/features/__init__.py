"""What the app builds on the stages: tools, grammar-constrained output, the agent loop, injection and
guardrails measured, temperature 0's roads, the guessing game, the handout, multi-turn chats, and one
call's spans on the stream's clock (call_timeline). The sentences the pages state are in lifecycle/lessons/.
"""
