"""The chart theme's helpers, and the theme's import as the first chart of a fresh server meets it."""

import subprocess
import sys
from pathlib import Path

from charts.theme import wrap_label

ROOT = Path(__file__).resolve().parents[1]


def test_wrap_label_breaks_long_labels_at_spaces_and_keeps_words_whole():
    assert wrap_label("inspection pass (extra)") == "inspection pass<br>(extra)"
    assert wrap_label("with 2 tools, 2 documents", 14) == "with 2 tools,<br>2 documents"
    assert wrap_label("prefill") == "prefill"
    assert wrap_label("averyveryverylongsingleword", 5) == "averyveryverylongsingleword"


RACE = '''
import importlib.machinery, sys, threading
started, release = threading.Event(), threading.Event()

class SlowPandas:
    """Another session's thread importing pandas: the module is in sys.modules, not yet executed."""
    def find_spec(self, name, path, target=None):
        if name != "pandas":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module
        def exec_module(module):
            started.set()
            release.wait(60)
            run(module)
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, SlowPandas())
other = threading.Thread(target=lambda: __import__("pandas"))
other.start()
assert started.wait(60)
errors = []

def first_chart():
    try:
        from charts.theme import TEMPLATE
        import plotly.graph_objects as go
        go.Figure(go.Bar(x=[1, 2], y=[3, 4]), layout=dict(template=TEMPLATE))
    except Exception as error:
        errors.append(repr(error))

page = threading.Thread(target=first_chart)
page.start()
page.join(3)
release.set()
page.join(60)
other.join(60)
print(errors)
'''


def test_a_chart_built_while_another_thread_imports_pandas_waits_for_it():
    """Plotly looks pandas up in sys.modules without importing it: a chart built while another session's thread
    is importing pandas read a half-built module (seen on a fresh server: "partially initialized module 'pandas'
    has no attribute 'Series'"). The theme imports pandas, which waits until the module is whole."""
    run = subprocess.run([sys.executable, "-c", RACE], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "[]"
