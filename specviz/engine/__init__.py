"""The engine: the models and how they run on this machine.

Loading and the catalogue (`models`), the kernels chosen by timing at load (`packing`, `kernels`),
the lean forward of Llama-family targets (`lean_llama`), the target's pass with its KV cache and
roll-back (`target`), the draft head's network (`draft_head`), turning logits into p or q and
drawing a token (`sampling`), batched target passes across sessions (`batching`), one decode per
device at a time (`gate`), tiny random models for tests (`toy`), transformers' own generate()
(`transformers_generate`) and the facts of the machine a figure was measured on (`machine`).

It imports only the basics (config, errors, shipped): nothing here knows Algorithm 1.
"""
