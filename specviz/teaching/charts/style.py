"""The visual language of every chart and of the token stream, defined once (docs/design.md, section 5).

Token statuses:
    accepted    a draft the target kept (green)
    rejected    the first draft the target refused in an iteration (red, struck through)
    discarded   drafts after the first rejection: never checked, thrown away (grey, struck through)
    resampled   the correction drawn from the residual max(0, p - q) after a rejection (orange)
    bonus       the extra token drawn from p when every draft was accepted (blue)
    target      drawn by the target with no draft to check: a baseline token, or an iteration where
                the draft proposed nothing (e.g. no n-gram match) (neutral)

p (the target) and q (the draft) keep one colour each everywhere; the residual has a third.
"""

from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio

STATUS_COLORS = {
    "accepted": "#2e7d32",
    "rejected": "#c62828",
    "discarded": "#9e9e9e",
    "resampled": "#ef6c00",
    "bonus": "#1565c0",
    "target": "#424242",
}
# Lighter backgrounds for the token stream, so the text itself stays readable.
STATUS_BACKGROUNDS = {
    "accepted": "#e8f5e9",
    "rejected": "#ffebee",
    "discarded": "#f5f5f5",
    "resampled": "#fff3e0",
    "bonus": "#e3f2fd",
    "target": "#fafafa",
}
STATUS_LABELS = {
    "accepted": "accepted draft",
    "rejected": "rejected draft",
    "discarded": "discarded draft (after a rejection, never checked)",
    "resampled": "resampled (from the residual)",
    "bonus": "bonus (every draft its iteration made was accepted)",
    "target": "target alone (no draft proposed)",
}

P_COLOR = "#6a1b9a"  # target p: purple
Q_COLOR = "#00897b"  # draft q: teal
RESIDUAL_COLOR = "#ef6c00"  # max(0, p - q): the same orange as the resampled token drawn from it
# The unnormalised residual: the same orange, paler. Translucent in the colour itself, not through
# marker.opacity, which Plotly leaves out of the legend swatch.
RESIDUAL_LIGHT_COLOR = "rgba(239, 108, 0, 0.45)"
ACCEPTED_MASS_COLOR = "rgba(46, 125, 50, 0.18)"  # min(p, q) shading
PREDICTION_COLOR = "#37474f"  # closed-form predictions drawn over measurements

# Subplot kinds no specviz chart draws (every chart is 2-D bars, lines or a heatmap).
_UNUSED_SUBPLOT_DEFAULTS = ("geo", "polar", "scene", "ternary", "mapbox", "map")


def _white_template() -> go.layout.Template:
    """Plotly's "plotly_white", kept to what 2-D bar, scatter and heatmap charts read: its 3-D, polar,
    ternary and map defaults are never drawn here, yet Plotly validated all of them for every figure:
    trimming it cut a figure's build by more than half (docs/benchmarks.md, "Figures once kept in code
    comments", "The app's server")."""
    white = pio.templates["plotly_white"]
    return go.layout.Template(
        layout={k: v for k, v in white.layout.to_plotly_json().items() if k not in _UNUSED_SUBPLOT_DEFAULTS},
        data={kind: getattr(white.data, kind) for kind in ("bar", "scatter", "heatmap")},
    )


# Plotly draws its toolbar (the modebar: zoom, pan, download) across the top right of a figure when
# the pointer is over it. The title sits under a band of this height kept free for it, so in a
# narrow column the toolbar never covers the title's end.
MODEBAR_BAND_PX = 28
# The title sits at the top of the figure, under the toolbar's band, and the legend in its own band
# at the bottom, below the x axis (a container-anchored legend reserves its own margin on top of the
# axis's), so a legend that wraps onto several lines in a narrow column never runs into the title
# or the axis title.
LAYOUT = {
    "template": _white_template(),
    "font": {"size": 13},
    "margin": {"l": 60, "r": 20, "t": 48 + MODEBAR_BAND_PX, "b": 50},
    "legend": {
        "orientation": "h",
        "yref": "container",
        "y": 0,
        "yanchor": "bottom",
        "xanchor": "left",
        "x": 0,
        "font": {"size": 12},
    },
    "xaxis": {"automargin": True},  # tick labels and the axis title push the plot up, above the legend band
    "hoverlabel": {"align": "left"},
}


def house_figure() -> go.Figure:
    """An empty figure in the house LAYOUT, for a chart to add its traces and its own layout to.
    Given to the constructor, Plotly validates the whole layout, template included, in one go; the
    same LAYOUT given to update_layout after the traces walked the template key by key and took
    about twice as long (docs/benchmarks.md, "Figures once kept in code comments", "The app's server").
    """
    return go.Figure(layout=LAYOUT)


def titled(text: str) -> dict:
    """A title pinned to the top-left of the figure, alone in the top margin (the legend is at the
    bottom), below the band the toolbar takes."""
    return {
        "text": text,
        "x": 0.01,
        "xanchor": "left",
        "y": 1.0,
        "yanchor": "top",
        "yref": "container",
        "pad": {"t": MODEBAR_BAND_PX},
    }
