"""Drafters: what makes a draft good. The race of every offline drafter on one prompt, the shipped
drafters on held-out text (the shipped record), and the learned drafts' acceptance along their training.
Words: the catalogue's section "drafts"."""

import json

import streamlit as st

from specviz.errors import SpecvizError
from specviz.labs import race, theory
from specviz.teaching import catalogue, glossary
from specviz.teaching.charts import quality
from specviz.teaching.charts import race as race_charts
from specviz.teaching.charts import theory as theory_charts
from specviz.training.training_record import read_training_record
from specviz_app import keys, language, params, render, session
from specviz_app.runs import gallery, loading


def _number(short: str, help: str, width: int = 96) -> st.column_config.NumberColumn:
    return st.column_config.NumberColumn(short, help=help, format="%.2f", width=width)


def _race_columns(w: dict[str, str], lang: str) -> dict:
    """The race table's columns: short headers, each with its full name and definition on hover, so all
    of them fit the page at 1400 px (the long headers pushed c, verify cost and both speedups off the right)."""
    length, alpha, c, verify = (glossary.term(n, lang) for n in ("mean_accepted_length", "alpha", "c", "verify_cost"))
    return {
        "drafter": st.column_config.TextColumn(w["col_drafter"], width=150),
        "length": _number(length.label, length.definition, 150),
        "alpha": _number("α", w["term_help"].format(label=alpha.label, definition=alpha.definition), 72),
        "c": _number("c", w["term_help"].format(label=c.label, definition=c.definition), 72),
        "verify": _number(w["col_verify"], w["term_help"].format(label=verify.label, definition=verify.definition)),
        "speedup": _number(w["col_speedup"], w["col_speedup_help"]),
        "predicted": _number(w["col_predicted"], w["col_predicted_help"]),
    }


def _start_race() -> None:
    st.session_state[keys.RACE_REQUEST] = True


def _run_race() -> None:
    settings, w, lang = st.session_state[keys.SETTINGS], language.words("drafts"), language.current()
    area = st.empty()
    box = area.container(border=True)
    bar = box.progress(0.0, text=w["loading_target"])
    with session.ErrorGuard(keys.RACE_ERROR, area) as guard:
        target = loading.get_model(params.DEFAULTS.model_names()[0], settings.dtype, settings.weights)

        def progress(done: int, total: int, name: str) -> None:
            name = race_charts.drafter_label({"draft": name}, lang)
            bar.progress(done / total, text=w["drafter_progress"].format(n=done + 1, total=total, name=name))

        result = race.run_race(
            settings.prompt, target=target, gamma=settings.gamma, temperature=float(settings.temperature),
            seed=settings.seed, max_new_tokens=settings.max_new, on_progress=progress,
        )  # fmt: skip
    if guard.failed:
        return
    area.empty()
    st.session_state[keys.RACE_RESULT] = result


def _show_race(result: dict, source: str) -> None:
    cfg, w, lang = result["config"], language.words("drafts"), language.current()
    prompt, esc = result["prompt"][:90], render.md_escape
    # The prompt is data: a language may quote it as code (`...`), where only a backtick needs care.
    prompt = prompt.replace("`", "'") if "`{prompt}`" in w["race_line"] else esc(prompt)
    said = w["race_line"].format(
        source=esc(source), prompt=prompt, gamma=cfg["gamma"], temperature=f"{cfg['temperature']:g}",
        new=cfg["max_new_tokens"], dtype=esc(cfg["dtype"]), speed=f"{result['baseline']['tokens_per_s']:.1f}",
        kernels=esc(w.get(f"kernels_{cfg['kernels']}", cfg["kernels"])),
    )  # fmt: skip
    st.caption(said)
    st.plotly_chart(race_charts.race_speed_figure(result, lang), key=keys.RACE_SPEED_CHART)
    st.plotly_chart(race_charts.race_position_figure(result, lang), key=keys.RACE_POSITIONS_CHART)
    rows = [
        {
            "drafter": race_charts.drafter_label(r, lang),
            "length": r["tokens_per_iteration"],
            "alpha": r["alpha"],
            "c": r["c"],
            "verify": r["verify_cost"],
            "speedup": r["speedup"],
            "predicted": r["predicted_speedup"],
        }  # fmt: skip
        for r in result["rows"]
    ]
    st.dataframe(rows, hide_index=True, column_config=_race_columns(w, lang), width="content")
    with st.expander(w["what_each_is"]):
        st.markdown(
            "\n".join(
                f"- **{render.md_escape(race_charts.drafter_label(r, lang))}**: {render.md_escape(_explained(r, w))}"
                for r in result["rows"]
            )
        )
    c, verify = glossary.term("c", lang), glossary.term("verify_cost", lang)
    st.caption(
        w["race_explained"].format(
            c_label=c.label, c_definition=c.definition, v_label=verify.label, v_definition=verify.definition
        )
    )
    cols = st.columns(2)
    cols[0].download_button(w["download_json"], json.dumps(result, indent=1), "race.json", key=keys.RACE_JSON)
    cols[1].download_button(w["download_csv"], race.race_to_csv(result), "race.csv", key=keys.RACE_CSV)


def _explained(row: dict, w: dict[str, str]) -> str:
    """What a drafter is, in the language on show (the catalogue's "drafters")."""
    return catalogue.drafter_words(row["draft"], language.current())[1]


def _race_tab() -> None:
    w = language.words("drafts")
    st.caption(w["race_caption"])
    st.button(w["race_button"], type="primary", on_click=_start_race, key=keys.RACE_RUN)
    st.caption(w["race_button_help"])
    if st.session_state.pop(keys.RACE_REQUEST, False):
        _run_race()
    if error := st.session_state.pop(keys.RACE_ERROR, None):
        st.error(w["race_failed"].format(error=error))
    result, source = st.session_state.get(keys.RACE_RESULT), w["source_here"]
    if result is None:
        result, source = gallery.shipped_race(), w["source_shipped"]
    if result is None:
        st.info(w["no_race"])
        return
    _show_race(result, source)


def _training_tab() -> None:
    w = language.words("drafts")
    st.caption(w["training_caption"])
    c = st.slider(w["c_slider"], 0.0, 1.0, 0.1, step=0.01, key=keys.DRAFTS_C, help=w["c_slider_help"])
    for kind, path in gallery.TRAINING_RECORDS.items():
        st.subheader(w.get(f"training_{path.stem}", kind))
        if not path.is_file():
            st.info(w["no_record"].format(name=path.name))
            continue
        try:
            data = read_training_record(path)
        except SpecvizError as exc:
            st.error(w["record_failed"].format(error=exc))
            continue
        history = data["history"]
        figure = theory_charts.draft_training_figure(history, c, lang=language.current())
        st.plotly_chart(figure, key=f"{keys.DRAFT_QUALITY_PREFIX}{path.stem}")
        if all(p.get("alpha_bench_prompts") is not None for p in history):
            st.caption(w["dashed_line"])
        _last_metrics(history[-1], c, w)


def _last_metrics(last: dict, c: float, w: dict[str, str]) -> None:
    """The record's last point: α, the speedup predicted from it, greedy agreement and α by position."""
    cols = st.columns(3)
    cols[0].metric(w["alpha_after"], f"{last['alpha']:.3f}", help=w["at_step"].format(step=last["step"]))
    g1 = theory.best_gamma(last["alpha"], c)
    cols[1].metric(w["predicted_t1"], f"{theory.walltime_improvement(last['alpha'], g1, c):.2f}×")
    if last.get("greedy_agreement") is not None:
        cols[2].metric(w["greedy_agreement"], f"{last['greedy_agreement']:.3f}")
    if last.get("alpha_by_position"):  # four numbers: a row of their own (a quarter row cut them short)
        depth = " · ".join(f"{a:.2f}" for a in last["alpha_by_position"])
        st.metric(w["alpha_by_position"], depth, help=w["alpha_by_position_help"])


def _quality_tab() -> None:
    """The shipped drafters on held-out free text: τ, acceptance and α by position, top-k coverage."""
    w, lang = language.words("drafts"), language.current()
    st.caption(w["quality_caption"])
    record, why = gallery.shipped_draft_report()
    if record is None:
        st.info(quality.record_problem(why, lang))
        return
    rows = quality.quality_rows(quality.shipped_columns(record, lang), record["gamma"], lang)
    st.dataframe(rows, hide_index=True, height=35 * (len(rows) + 1) + 3)  # every row in sight, no inner scroll
    st.caption(quality.record_words(record, lang))
    st.markdown(w["quality_explained"])


def drafts_page() -> None:
    w = language.words("drafts")
    st.title(language.words("app")["page_drafts"])
    st.caption(w["page_caption"])
    race_tab, quality_tab, training_tab = st.tabs([w["tab_race"], w["tab_quality"], w["tab_training"]])
    with race_tab:
        _race_tab()
    with quality_tab:
        _quality_tab()
    with training_tab:
        _training_tab()


drafts_page()
