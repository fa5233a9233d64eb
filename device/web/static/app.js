// Progressive enhancement only: every form works without this file.
"use strict";

document.addEventListener("DOMContentLoaded", function () {
  // Ask before a form marked data-confirm (deleting a note) is sent.
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.getAttribute("data-confirm"))) {
        event.preventDefault();
      }
    });
  });

  // Open an offloaded note in place: the verified body is shown as text,
  // never inserted as markup, and nothing is written back.
  var fetchForm = document.querySelector("form.fetch-form");
  if (fetchForm) {
    fetchForm.addEventListener("submit", function (event) {
      event.preventDefault();
      var button = fetchForm.querySelector("button");
      var box = document.getElementById("fetched");
      var body = document.getElementById("fetched-body");
      var hint = box.querySelector(".hint");
      button.disabled = true;
      button.textContent = "Opening…";
      fetch(fetchForm.action, {
        method: "POST",
        body: new FormData(fetchForm),
        headers: { "Accept": "application/json" },
        credentials: "same-origin"
      })
        .then(function (response) { return response.json(); })
        .then(function (answer) {
          box.hidden = false;
          if (answer.body !== undefined) {
            body.textContent = answer.body;
            box.classList.remove("failed");
            hint.hidden = false;
          } else {
            body.textContent = answer.error || "The Homebase did not answer.";
            box.classList.add("failed");
            hint.hidden = true;
          }
        })
        .catch(function () {
          box.hidden = false;
          box.classList.add("failed");
          hint.hidden = true;
          body.textContent = "The page could not reach pixie web.";
        })
        .finally(function () {
          button.disabled = false;
          button.textContent = "Open from Homebase";
        });
    });
  }
});
