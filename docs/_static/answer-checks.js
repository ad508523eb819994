// The answer fields of "Check your understanding" (docs/_ext/answer_checks.py writes them).
// Each question's right answers are in its data-answers, as the page's executed cells stored
// them. A right answer opens the explanation; a wrong one says so and opens nothing.
"use strict";

const answerChecks = (() => {
  // The same rule as the build's (docs/_ext/answer_matching.py).
  const DROPPED = new Set([" ", "\t", "\n", "`", "'", '"', "\u2009", "\u00a0"]);
  function normalised(text) {
    let kept = "";
    for (const ch of text.toLowerCase()) if (!DROPPED.has(ch)) kept += ch;
    return kept.replace(/\.+$/, "");
  }
  function asNumber(text) {
    const plain = normalised(text).replace(/[,_]/g, "");
    if (!/^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/.test(plain)) return null;
    return Number(plain);
  }
  function matches(given, answers, tolerance) {
    const number = asNumber(given);
    return answers.some((answer) => {
      const expected = asNumber(answer);
      if (number !== null && expected !== null) {
        return Math.abs(number - expected) <= tolerance * Math.abs(expected);
      }
      return normalised(given) === normalised(answer);
    });
  }

  function given(form) {
    const chosen = form.querySelector("input[type=radio]:checked");
    if (chosen) return chosen.value;
    const field = form.querySelector("input[type=text]");
    return field ? field.value : "";
  }

  function attach(box) {
    const form = box.querySelector(".answer-check-form");
    const verdict = box.querySelector(".answer-check-verdict");
    const explanation = box.querySelector(".answer-check-explanation");
    const answers = JSON.parse(box.dataset.answers);
    const tolerance = Number(box.dataset.tolerance || 0);
    form.hidden = false;
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const answer = given(form).trim();
      box.classList.remove("is-right", "is-wrong");
      if (!answer) {
        verdict.textContent = form.querySelector("fieldset")
          ? "Choose one answer, then Check."
          : "Type your answer, then Check.";
        return;
      }
      if (matches(answer, answers, tolerance)) {
        box.classList.add("is-right");
        verdict.textContent = "Right. Why:";
        explanation.open = true;
      } else {
        box.classList.add("is-wrong");
        verdict.textContent = "Not yet. Try again, or open \u201cShow me the answer\u201d.";
      }
    });
  }

  function attachAll(root = document) {
    root.querySelectorAll(".answer-check").forEach(attach);
  }
  return { attachAll, matches, normalised };
})();

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", () => answerChecks.attachAll());
} else {
  answerChecks.attachAll();
}
