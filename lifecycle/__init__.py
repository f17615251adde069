"""LLM Request Lifecycle: every stage of one chat-completions call, computed on a real local model.

One module per stage; each is plain data in, plain data out, with no Streamlit import.
"""
