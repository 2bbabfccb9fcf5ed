// Printing a page prints all of it (book/_ext/book_pdf.py): every folded block (a proof, a
// hidden code cell, the audit trail: <details>) opens while the page prints and closes again
// afterwards, and lazy images load first. sphinx-togglebutton opens its own toggles on print.
(() => {
  let opened = [];
  const open = () => {
    opened = [...document.querySelectorAll("details:not([open])")];
    for (const d of opened) d.open = true;
    for (const img of document.querySelectorAll('img[loading="lazy"]')) img.loading = "eager";
  };
  const restore = () => {
    for (const d of opened) d.open = false;
    opened = [];
  };
  window.addEventListener("beforeprint", open);
  window.addEventListener("afterprint", restore);
})();
