// MathJax 3, served from the site itself (assets/mathjax/, see docs/gen/hooks.py).
// Pages: pymdownx.arithmatex wraps every formula in an .arithmatex element as \( \) or \[ \],
// and only those are typeset. Notebook pages (mkdocs-jupyter): the Markdown cells keep
// $ and $$, so the notebook is typeset except its outputs and the site's own chrome.
(function () {
  var notebook = document.querySelector(".jupyter-wrapper") !== null;
  window.MathJax = {
    tex: {
      inlineMath: notebook ? [["$", "$"], ["\\(", "\\)"]] : [["\\(", "\\)"]],
      displayMath: notebook ? [["$$", "$$"], ["\\[", "\\]"]] : [["\\[", "\\]"]],
      processEscapes: true,
      processEnvironments: true,
    },
    options: notebook
      ? { ignoreHtmlClass: "tex2jax_ignore|jp-OutputArea|md-header|md-sidebar|md-footer" }
      : { ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex" },
  };
})();
