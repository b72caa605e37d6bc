"""Experiments built on the decoder: the paper's closed forms (`theory`, no torch), the
distribution lab (`lab`, its cost and progress words in `lab_time`), γ × temperature sweeps
(`sweep`), the race of drafters (`race`), where speculation pays by kind of task (`workloads`), the
side-by-side speed bench (`bench`) and how close a step runs to the memory roofline (`roofline`).
"""
