"""The Serving page's pass-cost chart names its points with "B n" labels only where they fit: near
points share one label, no two labels cover each other at the chart's size on a 1280×720 screen, and
every label names measured batch sizes of its own mode (the rest are named by hover)."""

from __future__ import annotations

import re

from specviz.labs import serving
from specviz.teaching.charts import serving as charts


def label_boxes(fig) -> list[tuple[str, str, tuple[float, float, float, float]]]:
    """(text, colour, box in the plot's pixels at charts.PLOT_PX) for every label the figure draws."""
    x0, x1 = fig.layout.xaxis.range
    y0, y1 = fig.layout.yaxis.range
    boxes = []
    for note in fig.layout.annotations:
        cx = (note.x - x0) / (x1 - x0) * charts.PLOT_PX[0]
        cy = (note.y - y0) / (y1 - y0) * charts.PLOT_PX[1] + note.yshift
        half = charts.CHAR_PX * len(note.text) / 2
        boxes.append(
            (note.text, note.font.color, (cx - half, cx + half, cy - charts.LINE_PX / 2, cy + charts.LINE_PX / 2))
        )
    return boxes


def overlaps(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


def test_the_recordings_labels_are_thinned_and_never_overlap():
    recorded = serving.shipped()
    boxes = label_boxes(charts.pass_cost_figure(recorded))
    named: dict[str, list[int]] = {}  # colour (a mode) -> every B its labels name, a run's ends expanded
    for text, colour, _ in boxes:
        numbers = [int(n) for n in re.findall(r"\d+", text)]
        if "–" in text:
            numbers = [b for b in recorded.batches() if numbers[0] <= b <= numbers[1]]
        named.setdefault(colour, []).extend(numbers)
    assert len(named) == 2 and all(len(bs) == len(set(bs)) for bs in named.values())  # no B named twice
    for i, (_, _, a) in enumerate(boxes):
        assert not any(overlaps(a, b) for _, _, b in boxes[i + 1 :])
        assert a[2] >= 0 and a[3] <= charts.PLOT_PX[1]  # inside the plot: the axis range leaves them room


def test_labels_name_measured_batches_of_their_own_mode():
    recorded = serving.shipped()
    colours = {colour: mode for mode, colour in charts.MODE_COLORS.items()}
    for text, colour, _ in label_boxes(charts.pass_cost_figure(recorded)):
        mode = colours[colour]
        named = [int(n) for n in re.findall(r"\d+", text)]
        measured = [b for b in recorded.batches() if recorded.cell(b, mode)]
        if "–" in text:  # a run: every B measured between its ends
            named = [b for b in measured if named[0] <= b <= named[1]]
        assert named and all(recorded.cell(b, mode) for b in named)


def test_a_lone_label_and_a_short_pair_say_each_b():
    assert charts._label_text([4], [1, 2, 4, 8]) == "B 4"
    assert charts._label_text([2, 4], [1, 2, 4, 8]) == "B 2, 4"
    assert charts._label_text([2, 4, 8], [1, 2, 4, 8]) == "B 2–8"
    assert charts._label_text([2, 8], [1, 2, 4, 8]) == "B 2, 8"  # not a run: 4 was measured between


def test_a_result_without_timed_passes_draws_an_empty_chart():
    cells = [{"batch": 1, "mode": "target", "requests": 1, "new_tokens": 4, "wall_s": 1.0, "tokens_per_s": 4.0}]
    empty = serving.from_dict({"schema": serving.SCHEMA, "config": {}, "cells": cells})
    fig = charts.pass_cost_figure(empty)
    assert not fig.data and not fig.layout.annotations
