"""A run's record as plain data, with no torch: the trace and its summary (`trace`), finished
traces on disk (`trace_store`), the speedup from timed pairs (`speedup`, its one home),
speculative against target alone (`sameness`) and the server's metrics in Prometheus' text format
(`metrics`).

It imports only the basics, so the app, the charts and the notebook read traces without torch.
"""
