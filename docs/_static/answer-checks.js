// The answer fields of "Check your understanding" (docs/_ext/answer_checks.py writes them).
// Each question's right answers are in its data-answers, as the page's executed cells stored
// them. A right answer opens the explanation; a wrong one says so, opens nothing, and shuts an
// explanation that only a right answer had opened.
"use strict";

const answerChecks = (() => {
  // The same rule as the build's (docs/_ext/answer_matching.py).
  const DROPPED = new Set([" ", "\t", "\n", "`", "'", '"', "\u2009", "\u00a0"]);
  function normalised(text) {
    let kept = "";
    for (const ch of text.toLowerCase()) if (!DROPPED.has(ch)) kept += ch;
    return kept.replace(/\.+$/, "");
  }
  function withoutUnit(text, unit) {
    const plain = normalised(text);
    for (const suffix of [normalised(unit || ""), "%"]) {
      if (suffix && plain.endsWith(suffix) && plain.length > suffix.length) {
        return plain.slice(0, -suffix.length);
      }
    }
    return plain;
  }
  // A shape as a reader writes one: "(64, 128)", "64x128"; "4,096" is a number instead.
  const SHAPE = /^[(\[]?\s*\d+(?:\s*(?:,\s*|x|\u00d7)\s*\d+)+\s*,?\s*[)\]]?$/i;
  function asShape(text) {
    const raw = text.trim().replace(/^`+|`+$/g, "").replace(/\.+$/, "");
    if (!SHAPE.test(raw) || !/[(\[x\u00d7]|,\s/i.test(raw)) return null;
    return raw.match(/\d+/g).map(Number).join(",");
  }
  function asNumber(text, unit) {
    const plain = withoutUnit(text, unit).replace(/[,_]/g, "");
    if (!/^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/.test(plain)) return null;
    return Number(plain);
  }
  function matches(given, answers, tolerance, unit) {
    const shape = asShape(given);
    const number = asNumber(given, unit);
    return answers.some((answer) => {
      const expectedShape = asShape(answer);
      if (shape !== null || expectedShape !== null) return shape === expectedShape;
      const expected = asNumber(answer, unit);
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
    const unit = box.dataset.unit || "";
    form.hidden = false;
    // Whether the explanation is open because an answer was right, not because the reader asked.
    let openedByRightAnswer = false;
    explanation.querySelector("summary").addEventListener("click", () => {
      openedByRightAnswer = false;
    });
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
      if (matches(answer, answers, tolerance, unit)) {
        box.classList.add("is-right");
        verdict.textContent = "Right. Why:";
        openedByRightAnswer = openedByRightAnswer || !explanation.open;
        explanation.open = true;
      } else {
        box.classList.add("is-wrong");
        if (openedByRightAnswer) explanation.open = false;
        openedByRightAnswer = false;
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
