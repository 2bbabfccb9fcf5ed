// The header menus' file entries save the file instead of opening it in a new tab: .ipynb
// and .py (book/_ext/pysource.py), the BibTeX and CITATION.cff (book/_ext/cite_stamp.py),
// which get the `download` attribute the theme's template does not write; "Cite this book"
// opens the index's cite section in the same tab. The whole-book PDF opens in a new tab.
document.addEventListener("DOMContentLoaded", () => {
  for (const a of document.querySelectorAll(
    ".dropdown-download-buttons a.btn-download-source-button, " +
    ".dropdown-download-buttons a.btn-download-py-button, " +
    ".dropdown-cite-buttons a.btn-cite-bib-button, " +
    ".dropdown-cite-buttons a.btn-cite-cff-button"
  )) {
    a.setAttribute("download", a.getAttribute("href").split("/").pop());
    a.removeAttribute("target");
  }
  for (const a of document.querySelectorAll(".dropdown-cite-buttons a.btn-cite-section-button")) {
    a.removeAttribute("target");
  }
});
