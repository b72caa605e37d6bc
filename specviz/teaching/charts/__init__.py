"""Plotly figure builders: pure functions, a Trace (or parts of one) in, a go.Figure out.

No torch and no streamlit here, so charts work on a laptop with only a trace file; colours and
statuses live in `style`, token statuses and hover cards in `tokens`.
"""

from specviz.teaching.charts.acceptance import (
    accept_length_figure,
    acceptance_by_position_figure,
    beta_along_text_figure,
    length_table,
    position_table,
)
from specviz.teaching.charts.inspector import bonus_figure, draft_figure, residual_figure
from specviz.teaching.charts.timeline import timeline_figure
from specviz.teaching.charts.tokens import display_token, hover_card, iteration_tokens, label_token, token_rows

__all__ = [
    "accept_length_figure",
    "acceptance_by_position_figure",
    "beta_along_text_figure",
    "bonus_figure",
    "display_token",
    "draft_figure",
    "hover_card",
    "iteration_tokens",
    "label_token",
    "length_table",
    "position_table",
    "residual_figure",
    "timeline_figure",
    "token_rows",
]
