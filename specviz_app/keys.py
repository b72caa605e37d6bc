"""Every session-state key of the app, named once (a typo is then a NameError, not a silent miss).

Each key's comment says how long its value lives. "One-shot": one part of the app sets it and the
part that acts on it pops it (on the same or the next script run), so it is acted on once. "For the
session": set once, on the session's first script run, and kept. The others hold state across
reruns until something replaces it. A leading underscore in a value marks nothing: keys of every
kind have one or not, and no code reads it. Widget keys that hold a setting are SETTING_PREFIX +
the Settings field name (specviz_app/sidebar.py).
"""

# ---- the run and the trace on show (session.py, running.py, app.py, sidebar.py) ------------
SETTINGS = "settings"  # the sidebar's Settings of this script run
LOADED = "loaded"  # the Loaded trace on show (trace, baseline, source, run key)
RUN_REQUESTED = "_run_requested"  # one-shot: Run was clicked; app.py pops it and decodes before drawing the page
RUN_ERROR = "_run_error"  # one-shot: the message of a run that failed; app.py pops it and shows it above the page
CANCEL_RUN = "cancel_run"  # the Cancel button of the run in progress (running.run)
APPLY_SETTINGS = "_apply_settings"  # one-shot: settings the sidebar pops into its widgets on the next run
FIRST_VISIT_DONE = "_first_visit_done"  # for the session: the first visit's example or decode has happened
INITIALISED = "_initialised"  # for the session: the sidebar has read the link into its widgets (init_from_url)
# For the session: the link as opened ({name: every value it gave}). The sidebar rewrites the URL on
# every run, so a page's own parameters (the lesson's ?step=) and ?trace= are read from here.
URL_QUERY = "_url_query"
# For the session: whether the link named a run setting (a bool): a demo to reproduce, which the
# first visit decodes when no shipped example matches it (opening.open_first_visit).
URL_GIVEN = "_url_given"
# For the session: what the link asked for that was refused or clamped. Never popped: the sidebar
# warns of it on every run, on every page.
URL_MESSAGES = "_url_messages"
EXAMPLE_PROMPT = "example_prompt"  # the example-prompt picker of the sidebar
# The app's language ("en", "zh"): read from ?lang= on the first visit, then set by a language control
# (specviz_app/language.py); every page reads it. The controls are views of it under their own keys.
LANG = "app_lang"
LANG_SIDEBAR = "lang_sidebar"  # the sidebar's language control
SETTING_PREFIX = "s_"  # + a Settings field name: the sidebar widget holding that setting (setting())


# ---- pages ------------------------------------------------------------------------------------
INSPECT_ITER = "inspect_iter"  # Step inspector: the iteration on show (its slider); a new trace pops it (session.py)
INSPECT_NEXT = "_inspect_next"  # Step inspector, one-shot: the iteration play moves to on the next rerun
PLAYING = "playing"  # Step inspector: play is on
TRACES_NOTICE = "_traces_notice"  # Traces, one-shot: what an upload or example opening did, said once
TRACES_UPLOAD_ERROR = "_traces_upload_error"  # Traces, one-shot: why the last upload did not open, said once
TRACES_UPLOAD_ROUND = "_traces_upload_round"  # Traces: times the uploader was emptied (its key's suffix), counts up
THEORY_ALPHA, THEORY_GAMMA, THEORY_C, THEORY_V = "th_alpha", "th_gamma", "th_c", "th_v"  # Theory: its sliders
THEORY_EXACT = "th_exact"  # Theory: the trace's unrounded α and c behind sliders set from it
SWEEP_RESULT = "sweep_result"  # Sweep: the result on show
SWEEP_SOURCE = "sweep_source"  # Sweep: where it came from (run here, or a file)
SWEEP_RUNNING = "sweep_running"  # Sweep: a sweep is running (Stop is offered)
SWEEP_STOP = "sweep_stop"  # Sweep: Stop was clicked
SWEEP_ERROR = "sweep_error"  # Sweep, one-shot: the message of a sweep that failed
LAB_REQUEST = "lab_request"  # Distribution lab, one-shot: the experiment to run on this rerun
LAB_RESULTS = "lab_results"  # Distribution lab: results by rule
LAB_STOP = "lab_stop"  # Distribution lab: Stop was clicked
LAB_ERROR = "lab_error"  # Distribution lab, one-shot: the message of an experiment that failed
RACE_REQUEST = "race_request"  # Drafters, one-shot: the race to run on this rerun
RACE_RESULT = "race_result"  # Drafters: the race on show
RACE_ERROR = "race_error"  # Drafters, one-shot: the message of a race that failed
WORKLOADS_RESULT = "workloads_result"  # Workloads: the result on show (None: the shipped recording)
WORKLOADS_SOURCE = "workloads_source"  # Workloads: where it came from (the recording, run here, a file)
WORKLOADS_RUNNING = "workloads_running"  # Workloads, one-shot: a run to start on this rerun
WORKLOADS_STOP = "workloads_stop"  # Workloads: Stop was clicked
WORKLOADS_ERROR = "workloads_error"  # Workloads, one-shot: the message of a run that failed
LESSON_STEP = "lesson_step"  # Lesson: the step on show
LESSON_LANG = "lesson_lang"  # Lesson: its language control (a view of LANG, specviz_app/language.py)
LESSON_PRESENTER = "lesson_presenter"  # Lesson: large type
PROMPT_CUT = "_prompt_cut"  # one-shot: the prompt typed or pasted was longer than allowed and was cut
LESSON_MESSAGE = "_lesson_message"  # Lesson, one-shot: what the link asked for that was invalid, said once


# ---- widget and element keys (Streamlit keeps a widget's value under its key) --------------
# Sidebar
RUN_BUTTON = "run_sidebar"
RUN_BUTTON_UNDER_PROMPT = "run_under_prompt"  # the same Run, again under the prompt
CHECK_PAIR = "check_pair"  # Check the pair (a custom pair)
CHECK_PAIR_RESULT = "check_pair_result"  # the sidebar box that holds what Check the pair found
# Traces
TRACES_UPLOAD = "traces_upload"
EXAMPLE_OPEN_PREFIX = "example-"  # + the example's name: its Open button
# Playground and the trace pages
TIMELINE_CHART = "timeline_chart"
ACCEPTANCE_BY_POSITION_CHART = "acceptance_by_position"
ACCEPTANCE_LENGTHS_CHART = "acceptance_lengths"
ACCEPTANCE_BETA_CHART = "acceptance_beta"
# Step inspector
INSPECT_PLAY = "inspector_play"
INSPECT_DRAFT_PREFIX = "draft-"  # + iteration and slot: a draft's p-versus-q chart
INSPECT_CORRECTION_PREFIX = "correction-"  # + kind and iteration: the resample's or bonus's chart
# Theory: its three charts
THEORY_TOKENS_CHART, THEORY_WALLTIME_CHART, THEORY_PLANE_CHART = "th-tokens", "th-walltime", "th-plane"
# Drafters
RACE_RUN = "race_run"
RACE_SPEED_CHART, RACE_POSITIONS_CHART = "race-speed", "race-positions"
RACE_JSON, RACE_CSV = "race_json", "race_csv"  # its downloads
DRAFTS_C = "dq_c"  # the c slider of the predicted speedup
DRAFT_QUALITY_PREFIX = "dq-"  # + the training record's file name: its chart
# Distribution lab
LAB_MODELS = "lab_models"
LAB_RULE = "lab_rule"
LAB_K, LAB_GAMMA, LAB_TEMPERATURE, LAB_SEED = "lab_k", "lab_gamma", "lab_temperature", "lab_seed"
LAB_SAMPLES_PREFIX = "lab_n_"  # + the models' choice: n, whose default depends on it
LAB_RUN_ONE, LAB_RUN_ALL, LAB_STOP_BUTTON = "lab_run_one", "lab_run_all", "lab_stop_button"
LAB_CHECK_RUN = "lab_check_run"  # Distribution lab: the button that runs this machine's quick check
LAB_RULES_CHART = "lab-rules"
LAB_SHOW = "lab_show"  # which rule's distribution is drawn
LAB_DISTRIBUTION_PREFIX = "lab-dist-"  # + the rule: its distribution chart
# Sweep
SWEEP_MODELS = "sweep_models"
SWEEP_GAMMAS, SWEEP_TEMPERATURES, SWEEP_MAX_NEW = "sweep_gammas", "sweep_temps", "sweep_max_new"
SWEEP_RUN, SWEEP_STOP_BUTTON = "sweep_run", "sweep_stop_button"
SWEEP_HEATMAP, SWEEP_TOKENS_CHART, SWEEP_SPEEDUP_CHART = "sweep-heatmap", "sweep-tokens", "sweep-speedup"
SWEEP_FILES = "sw_dl_json", "sw_dl_csv", "sweep_upload", "sweep_open"  # render.save_or_load: downloads, uploader, Open
# Workloads
WORKLOADS_DRAFTS, WORKLOADS_PROMPTS, WORKLOADS_MAX_NEW = "wl_drafts", "wl_prompts", "wl_max_new"
WORKLOADS_RUN, WORKLOADS_STOP_BUTTON = "wl_run", "wl_stop_button"
WORKLOADS_CHART_PREFIX = "wl-"  # + the measure: its chart
WORKLOADS_POSITION_DRAFT, WORKLOADS_POSITIONS_CHART = "wl_position_draft", "wl-positions"
WORKLOADS_FILES = "wl_dl_json", "wl_dl_csv", "wl_upload", "wl_open"  # render.save_or_load: downloads, uploader, Open
# Serving
SERVING_RESULT = "serving_result"  # Serving: the result on show (None: the shipped recording)
SERVING_SOURCE = "serving_source"  # Serving: where it came from (the recording, run here, a file)
SERVING_RUNNING = "serving_running"  # Serving, one-shot: a run to start on this rerun
SERVING_STOP = "serving_stop"  # Serving: Stop was clicked
SERVING_ERROR = "serving_error"  # Serving, one-shot: the message of a run that failed
SERVING_BATCHES, SERVING_MAX_NEW = "sv_batches", "sv_max_new"
SERVING_RUN, SERVING_STOP_BUTTON = "sv_run", "sv_stop_button"
SERVING_CHART_PREFIX = "sv-"  # + the chart's name
REGIME_RESULT = "regime_result"  # Serving's regime section: measured here (None: the shipped recording)
REGIME_RUN, REGIME_ERROR = "sv_regime_run", "regime_error"  # its Measure button; the message of a failed run
REGIME_STOP, REGIME_STOP_BUTTON = "regime_stop", "sv_regime_stop"  # its Stop: clicked, and the button
SERVING_FILES = "sv_dl_json", "sv_dl_csv", "sv_upload", "sv_open"  # render.save_or_load: downloads, uploader, Open
# Lesson
LESSON_BACK, LESSON_NEXT = "lesson_back", "lesson_next"
LESSON_CONTENTS_PREFIX = "lesson_contents_"  # + language-step (controls.lesson.picker_key): the contents picker
LESSON_SIDE, LESSON_NOTES = "lesson_side", "lesson_notes"  # containers the presenter view styles
LESSON_FIGURE_PREFIX = "lesson-"  # + the step's figure
LESSON_FIGURE = "lesson_figure"  # presenter view: the figure's box, as tall as the screen allows


def setting(field: str) -> str:
    """The key of the sidebar widget holding the Settings field `field`."""
    return SETTING_PREFIX + field
