"""The app's server: how a request reaches the pages, and what runs beside them (the app's half of
the server wing; the library's half, the device gate and the batcher, is specviz/serving/).

    python -m specviz_app · specviz app · ./dev.sh app
      │ launch.py: exec `streamlit run serving/asgi.py` with SERVER_SETTINGS (`streamlit run app.py`
      │            in a checkout serves the same st.App, its settings from .streamlit/config.toml)
      ▼
    asgi.py: st.App of the page script ../app.py, malloc.py's two glibc arenas set first
      ├── GET /metrics  server.py: specviz.traces.metrics' registry, the gates' queues read at each scrape
      ├── GET /healthz  health.py: 200 once the default models are loaded, 503 while they preload
      ├── a path that is no page: 404 (health.UnknownPathIs404)
      └── a page, over the websocket /_stcore/stream: specviz_app/app.py runs once per rerun
            │ the first page: background.preload, the default pair loaded and warmed in a thread
            │ every script run marked (background.page_drawing), so a timing pair beside it is retimed
            │ Run (specviz_app/runs/running.py): shared_runs.RUNS.claim(the run's key)
            │   the leader decodes (specviz.serving: a turn at the gate, a seat at the batcher);
            │   followers wait for its recording; later sessions get it at once; shared_runs.save
            │   writes it to the trace store the replicas share
            ▼
          background.TimingPairs: the run's further timed pairs, one worker thread, when the gate is idle

    reconnect.py   a browser back from a session this server does not hold (a lost replica): counted
    replicas.py    N of these processes behind nginx (a sticky cookie), one trace store
    ws_client.py   a student without a browser: the page load's rerun_script, timed (scripts/ws_load.py)

Nothing here imports the rest of specviz_app (tests/test_import_rules.py): the pages, the runs and
the controls call into the server's wing, never the other way round; asgi.py names the page script
by its path.
"""
