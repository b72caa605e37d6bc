"""What a learner sees, with no torch and no streamlit: the Plotly figures and the HTML token
stream (`charts`), the acceptance words every page uses (`glossary`), the lesson (`lesson`) and the
app's views in Jupyter (`notebook`).
"""
