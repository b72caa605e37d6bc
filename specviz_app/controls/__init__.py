"""A page's own controls and state, kept apart where the page file would pass 200 lines.

- theory.py: the Theory page's sliders for α, γ, c and v, the button that sets them from the trace
  on show, and the note on whether that trace drafted as the formula assumes.
- lesson.py: the Lesson page's step on show and presenter view, read from the opening link, then
  from the page's own controls, and written back to the URL.

Each is imported by its one page (specviz_app/app_pages/theory.py, lesson.py) and by no other module.
"""
