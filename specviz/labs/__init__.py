"""Experiments built on the decoder: the paper's closed forms (`theory`, no torch), the
distribution lab (`lab`), γ × temperature sweeps (`sweep`), the race of drafters (`race`) and the
side-by-side speed bench (`bench`).
"""
