"""The Lesson's presenter view for a projector: the CSS that fits a step to the screen (1024x768 to
1920x1080), kept beside the page's other controls so the page stays under 200 lines."""

# Presenter view fits a 1280x720 projector: Streamlit's own paddings (6rem above, 10rem below the
# page) and header go, the body text folds into an expander, and every text a room must read (the
# takeaway, notes, captions, the token stream and its legend) is at least 20 px in dark ink.
PRESENTER_CSS = """<style>
header[data-testid="stHeader"] {display: none !important}
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"] {display: none !important}
[data-testid="stMainBlockContainer"] {padding: 0.75rem 2rem 0.5rem !important}
[data-testid="stMain"] h1 {font-size: 2.1rem !important; padding: 0 !important; line-height: 1.25 !important}
[data-testid="stMain"] [data-testid="stMarkdownContainer"] p,
[data-testid="stMain"] [data-testid="stMarkdownContainer"] li
{font-size: 1.6rem !important; line-height: 1.45 !important; color: #1a1a1a}
[data-testid="stMain"] .st-key-lesson_notes [data-testid="stMarkdownContainer"] p,
[data-testid="stMain"] [data-testid="stCaptionContainer"],
[data-testid="stMain"] [data-testid="stCaptionContainer"] p
{font-size: 1.25rem !important; line-height: 1.4 !important; color: #1a1a1a !important; opacity: 1 !important}
[data-testid="stMain"] .st-key-lesson_side, [data-testid="stMain"] .st-key-lesson_notes {gap: 0.6rem}
[data-testid="stMain"] .sv-stream {font-size: 26px !important; line-height: 1.8 !important}
[data-testid="stMain"] .sv-legend {font-size: 20px !important; line-height: 1.35; gap: 8px 14px !important;
color: #1a1a1a; margin: 0 !important}
[data-testid="stMain"] [data-testid="stWidgetLabel"] p,
[data-testid="stMain"] [data-testid="stExpander"] summary p {font-size: 1.1rem !important}
[data-testid="stMain"] [data-testid="stButtonGroup"] [data-testid="stMarkdownContainer"] p
{font-size: 1.05rem !important; line-height: 1.3 !important}
[data-testid="stMain"] .st-key-lesson_figure {min-height: calc(100vh - 220px) !important}
[data-testid="stMain"] .st-key-lesson_back p, [data-testid="stMain"] .st-key-lesson_next p
{font-size: 1.35rem !important; white-space: nowrap}
@media (max-width: 1100px) {
[data-testid="stMain"] .st-key-lesson_side [data-testid="stMarkdownContainer"] p {font-size: 1.3rem !important}
[data-testid="stMain"] .st-key-lesson_side .sv-legend {font-size: 17px !important}
[data-testid="stMain"] .st-key-lesson_side .sv-stream {font-size: 22px !important; line-height: 1.6 !important}
[data-testid="stMain"] .st-key-lesson_notes [data-testid="stMarkdownContainer"] p,
[data-testid="stMain"] .st-key-lesson_notes [data-testid="stCaptionContainer"] p {font-size: 1.05rem !important}
}
</style>"""
# The figure's height follows the screen's: the box above (a min-height, since a flex item ignores a
# height) and the chart stretched to fill it, never below its own 500 px: 500 px at 720, 548 at 768,
# 860 at 1080. 220 px: the button row, the title, the folded explanation and their paddings.
