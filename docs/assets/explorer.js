// The trace explorer: vanilla JS, no network. Each question set's traces are a script
// (data/traces-<set>.js) loaded on demand, so the page also works from file://.
(function () {
  "use strict";
  var index = JSON.parse(document.getElementById("explorer-index").textContent);
  var setPicker = document.getElementById("set-picker");
  if (!setPicker || !index.length) { return; }
  var qPicker = document.getElementById("question-picker");
  var sysPicker = document.getElementById("system-picker");
  var loaded = {};
  var shown = {};
  var TAGS = /<(think|search|information|summary|answer)>([\s\S]*?)(?:<\/\1>|$)/g;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function fmt(x) {
    if (x === null || x === undefined) { return "–"; }
    return (Math.round(x * 1000) / 1000).toString();
  }
  function isMain(name) {
    return /brit__ca_ls_si|:mmr2_grpo$|:mmr2_sft$|__ft$|flat_dense|^[^:]*:mmr2/.test(name) &&
      !/__base$/.test(name);
  }
  function params() {
    var out = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) { out[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1)); }
    });
    return out;
  }
  function entry(name) {
    for (var i = 0; i < index.length; i++) { if (index[i].name === name) { return index[i]; } }
    return index[0];
  }
  function load(name, done) {
    if (window.MMRAG_TRACES && window.MMRAG_TRACES[name]) { done(window.MMRAG_TRACES[name]); return; }
    var s = document.createElement("script");
    s.src = entry(name).script;
    s.onload = function () { loaded[name] = true; done(window.MMRAG_TRACES[name]); };
    s.onerror = function () { document.getElementById("answers").textContent = "could not load " + s.src; };
    document.body.appendChild(s);
  }

  function taggedText(text, parent) {
    var last = 0, m, any = false;
    TAGS.lastIndex = 0;
    while ((m = TAGS.exec(text)) !== null) {
      any = true;
      if (m.index > last && text.slice(last, m.index).trim()) { parent.appendChild(el("pre", "turn plain", text.slice(last, m.index).trim())); }
      var block = el("div", "turn tag-" + m[1]);
      block.appendChild(el("span", "tag", "<" + m[1] + ">"));
      block.appendChild(el("pre", null, m[2].trim()));
      parent.appendChild(block);
      last = TAGS.lastIndex;
      if (m[0].length === 0) { break; }
    }
    if (!any) { parent.appendChild(el("pre", "turn plain", text)); }
    else if (last < text.length && text.slice(last).trim()) { parent.appendChild(el("pre", "turn plain", text.slice(last).trim())); }
  }

  function evidenceList(step, tagged) {
    var box = el("div", "evidence" + (tagged ? " turn tag-information" : ""));
    if (tagged) { box.appendChild(el("span", "tag", "<information>")); }
    var ol = el("ol");
    step.evidence.forEach(function (e) {
      var li = el("li", e.gold ? "gold" : null);
      if (e.thumb) { var img = el("img", "thumb"); img.src = e.thumb; img.alt = e.id; li.appendChild(img); }
      var head = el("span", "ev-id", e.kind + " " + e.id + (e.unit ? " · unit " + e.unit : "") +
        (e.score !== null && e.score !== undefined ? " · " + fmt(e.score) : "") + (e.gold ? " · gold" : ""));
      li.appendChild(head);
      if (e.content) { li.appendChild(el("div", "ev-content", e.content)); }
      ol.appendChild(li);
    });
    box.appendChild(ol);
    if (step.more_evidence) { box.appendChild(el("p", "note", "… and " + step.more_evidence + " more items")); }
    return box;
  }

  function traceColumn(name, t) {
    var col = el("article", "trace");
    col.appendChild(el("h3", null, name));
    var verdict = t.accuracy >= 1 ? "correct" : "wrong";
    var head = el("p", "answer " + verdict);
    head.appendChild(el("strong", null, verdict === "correct" ? "✓ " : "✗ "));
    head.appendChild(document.createTextNode(t.answer || "(no answer)"));
    col.appendChild(head);
    col.appendChild(el("p", "meta", "recall " + fmt(t.recall) + " · tokens " + t.tokens + " · tool calls " +
      t.tool_calls + " · format errors " + t.format_errors));
    t.steps.forEach(function (s, i) {
      var st = el("section", "step action-" + s.action);
      var label = (i + 1) + ". " + s.action + (s.target ? " → " + s.target : "");
      st.appendChild(el("h4", null, label));
      if (s.query) { st.appendChild(el("p", "query", "query: " + s.query)); }
      var tagged = !!(s.text && /<(think|search|summary|answer)>/.test(s.text));
      if (s.text) { taggedText(s.text, st); }
      if (s.evidence.length) { st.appendChild(evidenceList(s, tagged)); }
      if (s.summary && !tagged) { st.appendChild(el("p", "summary", "→ " + s.summary)); }
      if (s.format_error) { st.appendChild(el("p", "format-error", "format error: " + s.format_error)); }
      col.appendChild(st);
    });
    return col;
  }

  function renderQuestion(q, source) {
    var box = document.getElementById("question");
    box.textContent = "";
    if (q.image) { var img = el("img", "qimage"); img.src = q.image; img.alt = "the question's image"; box.appendChild(img); }
    box.appendChild(el("h2", null, q.text));
    box.appendChild(el("p", "meta", q.id + (q.kind ? " · " + q.kind : "") + " · " + q.split + " · from " + source));
    var gold = el("p", "gold-answer");
    gold.appendChild(el("strong", null, "gold answer: "));
    gold.appendChild(document.createTextNode(q.answer + (q.aliases.length ? " (also: " + q.aliases.join(", ") + ")" : "")));
    box.appendChild(gold);
    if (q.choices.length) { box.appendChild(el("p", "choices", "choices: " + q.choices.join(" · "))); }
    if (q.history.length) {
      var h = el("ol", "history");
      q.history.forEach(function (t) { h.appendChild(el("li", null, t.question + " → " + t.answer)); });
      box.appendChild(el("p", "note", "conversation so far:")); box.appendChild(h);
    }
    if (q.decomposition.length) {
      var d = el("ol", "decomposition");
      q.decomposition.forEach(function (s) { d.appendChild(el("li", null, s.text + " (" + s.tool + ") → " + s.answer)); });
      box.appendChild(el("p", "note", "gold decomposition:")); box.appendChild(d);
    }
    var ev = el("p", "gold-evidence");
    ev.appendChild(el("strong", null, "gold evidence: "));
    ev.appendChild(document.createTextNode(q.gold.length ? q.gold.join(", ") : "(none recorded)"));
    box.appendChild(ev);
  }

  function render() {
    var name = setPicker.value, data = window.MMRAG_TRACES[name];
    var q = data.questions.filter(function (x) { return x.id === qPicker.value; })[0] || data.questions[0];
    renderQuestion(q, data.source);
    var grid = document.getElementById("answers");
    grid.textContent = "";
    var answers = data.answers[q.id] || {};
    data.systems.forEach(function (sys) {
      if (!shown[sys]) { return; }
      if (answers[sys]) { grid.appendChild(traceColumn(sys, answers[sys])); }
      else { var c = el("article", "trace"); c.appendChild(el("h3", null, sys)); c.appendChild(el("p", "note", "no trace for this question")); grid.appendChild(c); }
    });
    history.replaceState(null, "", "#set=" + encodeURIComponent(name) + "&q=" + encodeURIComponent(q.id));
  }

  function chooseSet(name, qid) {
    setPicker.value = name;
    load(name, function (data) {
      qPicker.textContent = "";
      data.questions.forEach(function (q) {
        var o = el("option", null, q.id + " — " + q.text.slice(0, 90)); o.value = q.id; qPicker.appendChild(o);
      });
      if (qid) { qPicker.value = qid; }
      if (!qPicker.value && data.questions.length) { qPicker.value = data.questions[0].id; }
      sysPicker.querySelectorAll("label").forEach(function (l) { l.remove(); });
      var anyMain = data.systems.some(isMain);
      shown = {};
      data.systems.forEach(function (sys) {
        shown[sys] = anyMain ? isMain(sys) : true;
        var label = el("label"), box = el("input");
        box.type = "checkbox"; box.checked = shown[sys];
        box.addEventListener("change", function () { shown[sys] = box.checked; render(); });
        label.appendChild(box); label.appendChild(document.createTextNode(" " + sys));
        sysPicker.appendChild(label);
      });
      render();
    });
  }

  index.forEach(function (s) {
    var o = el("option", null, s.name + " (" + s.questions.length + " questions, " + s.systems.length + " systems)");
    o.value = s.name; setPicker.appendChild(o);
  });
  setPicker.addEventListener("change", function () { chooseSet(setPicker.value); });
  qPicker.addEventListener("change", render);
  var p = params();
  chooseSet(entry(p.set).name, p.q);
}());
