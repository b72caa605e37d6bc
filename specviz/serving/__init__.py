"""Serving several decodes from one process: the library's half of the server wing (no Streamlit).

    a decode ──> ServingHooks.decoding(target)  (hooks.py: the one door to the decoder)
                   │ 1. a turn at the device's gate (gate.py): one decode per device at a time,
                   │    first come first served, the queue bounded and its place told (on_wait)
                   │ 2. batched=True on a lean target: a seat at its batcher (batching.py), whose
                   │    decodes hold the gate together and run their target passes as one forward
                   ▼
                 the decoder's iterations (specviz.decoding), each target pass through the seat

The decoder knows only `hooks.decoding(target)`: a context held for the whole decode that yields
an opaque seat for the target's passes (None: alone). The app's half (sessions, shared runs,
replicas, the websocket client, metrics routes) is specviz_app/serving/.
"""
