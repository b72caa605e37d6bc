"""Where the trace on show comes from: a run decoded here (or shared), or a trace opened.

    the Run button ──> running.py: RunRequest (the models through loading.py), a shared recording
                       or the decode with its progress, the baseline, the timing pairs started
    an upload, a ?trace= link, a first visit ──> opening.py (gallery.py: what ships, no model)
                                │
                                ▼
                  session.show: the trace on show, which every page draws

The pages and the sidebar read from here; the server's wing (specviz_app/serving/) is below it.
"""
