// Make the page's download menu entries (.ipynb, .py) save the file instead of opening it in
// a new tab: add the `download` attribute the theme's template does not write.
document.addEventListener("DOMContentLoaded", () => {
  for (const a of document.querySelectorAll(
    ".dropdown-download-buttons a.btn-download-source-button, " +
    ".dropdown-download-buttons a.btn-download-py-button"
  )) {
    a.setAttribute("download", a.getAttribute("href").split("/").pop());
    a.removeAttribute("target");
  }
});
