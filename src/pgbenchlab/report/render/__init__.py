"""Renderers: a built view model (`report.views`) drawn as HTML, Markdown or chart images.

Owns the pages (`html`, `sections`, `tables`, `payload`, `bundle`, `assets/`; the static site
`site` and a bisection's page `bisection`), written from Jinja2 templates (`templates/`, one
autoescaping environment in `templating`: no value reaches a page but as text), the Markdown
summary (`markdown`), the Vega-Lite charts and their data (`charts`, `compare_charts`,
`runcharts`, `timeline`, `chart_data`, the capacity knee `knee`) and their export as images
(`images`). A renderer only renders: it imports `report.views` (the records and the shared
text), `analysis` constants and `jsontext`; never the store, and it computes no statistics.
"""
