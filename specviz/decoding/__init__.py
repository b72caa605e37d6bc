"""Algorithm 1: one speculative iteration and the loop around it.

`decoder` (speculative_iteration, the target-alone baseline, the loop), `verify` (accept, reject,
resample and bonus as pure tensor functions), `recorder` (one iteration's tensors -> the trace's
numbers) and `prompting` (prompt text -> token ids, the one home of the chat template).

It uses the drafters, the engine and the traces; nothing above it.
"""
