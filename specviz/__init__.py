"""specviz: speculative decoding, made visible.

The public API is imported lazily so that `specviz.traces.trace`, `specviz.labs.theory` and
`specviz.teaching.charts` can be used without torch installed or loaded. The package also tells traces
where their notebook views are (specviz.teaching.notebook, loaded on a trace's first display), so that
the trace, which the views are built on, never imports them.
"""

from __future__ import annotations

from typing import Any

from specviz.traces import trace as _trace

__all__ = [
    "DecodeOptions",
    "SamplingConfig",
    "Trace",
    "autoregressive_generate",
    "compare_runs",
    "load_model",
    "speculative_generate",
]
__version__ = "0.1.0"

_LAZY = {
    "speculative_generate": "specviz.decoding.decoder",
    "autoregressive_generate": "specviz.decoding.decoder",
    "Trace": "specviz.traces.trace",
    "DecodeOptions": "specviz.config",
    "SamplingConfig": "specviz.config",
    "load_model": "specviz.engine.models",
    "compare_runs": "specviz.traces.sameness",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'specviz' has no attribute {name!r}")


def _notebook_views():
    from specviz.teaching import notebook  # plotly and the charts load when a trace is first shown, not here

    return notebook


_trace.register_notebook_views(_notebook_views)
