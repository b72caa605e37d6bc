"""Helpers of the Streamlit app (sidebar, session state, runs, HTML rendering).

Kept outside `specviz/` because they import streamlit and the library must not. `params` is the
exception: it is pure Python (settings and URL validation), so it is tested without streamlit.
"""
