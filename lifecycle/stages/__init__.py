"""The journey's stages, in the order a call meets them: each module is plain data in, plain data out.

request (and json_fields, its checks), tokenization, context_window, vocabulary, forward_pass (and block,
one layer opened up), sampling (the next-token distribution and the choice), generation, streaming,
detokenization, kv_cache, logprobs and completion (the answer).
"""
