"""A run's record as plain data, with no torch: the trace and its summary (`trace`), finished
traces on disk (`trace_store`), the speedup from timed pairs (`speedup`, its one home) and
speculative against target alone (`sameness`).

It imports only the basics, so the app, the charts and the notebook read traces without torch.
"""
