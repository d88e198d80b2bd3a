/* IntraSkill episode browser: pick a run (a trace file), filter its episodes, step through one turn by turn,
   and read the same task in a second run side by side. Plain JavaScript, no dependencies.
   <div id="episode-browser" data-source="static|live" data-root="…" data-lang="en|zh"> holds it:
   static reads runs.json, <folder>/index-NNNN.json and <folder>/episodes-NNNN.json under data-root;
   live reads /api/replay/{runs,run,episode} (intraskill.report.browser and intraskill.report.replay). */
(function () {
  "use strict";

  const TEXT = {
    en: {
      run: "Run", compare: "Compare with", none: "— none —", any: "any", task: "Task", split: "Split",
      success: "Success", yes: "yes", no: "no", unscored: "unscored", skill: "Skill context",
      noSkills: "no skills", failure: "Failure class", turns: "Turns", minTurns: "min", maxTurns: "max",
      episode: "Episode", sample: "Sample", reward: "Reward", skills: "Skills", shown: "{n} of {total} episodes",
      loading: "loading…", loaded: "{n} of {total} episodes loaded", previous: "◀ previous", next: "next ▶",
      pageOf: "page {page} of {pages}", turnOf: "Turn {turn} of {turns}", finalStep: "Final reward",
      seen: "Page the policy saw", initial: "The search home page with the task (not stored in the trace).",
      instruction: "Task instruction", reply: "Reply", reasoning: "Reasoning", action: "Parsed action",
      noAction: "no action reached the store", parseError: "parse error", protocolError: "protocol error",
      feedback: "Store feedback", valid: "executed", invalid: "refused", pageType: "returned page",
      tokens: "Tokens", prompt: "prompt", completion: "completion", finish: "finish",
      status: "Status", termination: "Termination", purchase: "Purchase", noPurchase: "no purchase",
      goal: "Private goal (never shown to the policy)", error: "Error", model: "Model", seed: "Seed",
      notInRun: "Task {task} has no episode in this run.", pick: "Pick an episode in the list.",
      noRuns: "No runs to browse.", sameTask: "Same task", skillTexts: "chunk texts",
      fileHint: "The browser reads its data with fetch(), which file:// pages cannot do: serve the site, e.g. "
        + "python -m http.server -d _site, and open it over http://.",
      failures: {
        success: "success", technical_error: "technical error", protocol_errors: "protocol errors",
        action_limit: "action limit", wrong_type: "wrong type", missing_attribute: "missing attribute",
        wrong_option: "wrong option", over_budget: "over budget", unverifiable_price: "unverifiable price"
      }
    },
    zh: {
      run: "运行", compare: "对比运行", none: "— 无 —", any: "全部", task: "任务", split: "划分",
      success: "成功", yes: "是", no: "否", unscored: "未评分", skill: "技能上下文", noSkills: "无技能",
      failure: "失败类别", turns: "轮次", minTurns: "最少", maxTurns: "最多", episode: "回合", sample: "样本",
      reward: "奖励", skills: "技能", shown: "显示 {n} / {total} 个回合", loading: "加载中…",
      loaded: "已加载 {n} / {total} 个回合", previous: "◀ 上一步", next: "下一步 ▶",
      pageOf: "第 {page} / {pages} 页", turnOf: "第 {turn} / {turns} 轮", finalStep: "最终奖励",
      seen: "策略看到的页面", initial: "带有任务的搜索首页（轨迹中未保存）。", instruction: "任务指令",
      reply: "回复", reasoning: "推理", action: "解析出的动作", noAction: "没有动作到达商店",
      parseError: "解析错误", protocolError: "协议错误", feedback: "商店反馈", valid: "已执行", invalid: "被拒绝",
      pageType: "返回页面", tokens: "Token", prompt: "提示", completion: "生成", finish: "结束原因",
      status: "状态", termination: "结束原因", purchase: "购买", noPurchase: "未购买",
      goal: "私有目标（从不展示给策略）", error: "错误", model: "模型", seed: "种子",
      notInRun: "任务 {task} 在此运行中没有回合。", pick: "请在列表中选择一个回合。",
      noRuns: "没有可浏览的运行。", sameTask: "同一任务", skillTexts: "技能正文",
      fileHint: "浏览器用 fetch() 读取数据，file:// 页面无法这样做：请启动服务，例如 "
        + "python -m http.server -d _site，再通过 http:// 打开。",
      failures: {
        success: "成功", technical_error: "技术错误", protocol_errors: "协议错误", action_limit: "动作上限",
        wrong_type: "类型错误", missing_attribute: "属性缺失", wrong_option: "选项错误", over_budget: "超出预算",
        unverifiable_price: "价格无法核实"
      }
    }
  };
  const REWARD_PARTS = ["reward", "r_type", "r_att", "r_option", "r_price", "r_loose", "r_strict", "r_success"];
  const GOAL_FIELDS = ["instruction_text", "instruction_simple", "asin", "name", "category", "attributes",
    "goal_options", "price_upper"];
  const LIST_PAGE = 50;
  const CHUNK_CACHE = 8;

  const host = document.getElementById("episode-browser");
  if (!host) return;
  const lang = host.dataset.lang || (document.documentElement.lang.startsWith("zh") ? "zh" : "en");
  const words = TEXT[lang] || TEXT.en;

  function t(key, values) {
    let text = words[key] !== undefined ? words[key] : TEXT.en[key];
    for (const [name, value] of Object.entries(values || {})) text = text.replace("{" + name + "}", value);
    return text;
  }

  function failureText(name) { return words.failures[name] || name; }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function pad(n) { return String(n).padStart(4, "0"); }

  function number(value, digits) {
    if (value === null || value === undefined) return "—";
    return typeof value === "number" && !Number.isInteger(value) ? value.toFixed(digits || 3) : String(value);
  }

  async function getJson(url) {
    let response;
    try {
      response = await fetch(url);
    } catch (error) {
      throw new Error(location.protocol === "file:" ? t("fileHint") : error.message);
    }
    if (!response.ok) {
      let message = response.statusText;
      try { message = (await response.json()).error || message; } catch (ignored) { /* not JSON */ }
      throw new Error(response.status + ": " + message);
    }
    return response.json();
  }

  function dataSource(kind, base) {
    if (kind === "live") {
      return {
        runs: () => getJson(base + "runs"),
        page: (run, page) => getJson(base + "run?run=" + encodeURIComponent(run.id) + "&page=" + page),
        episode: (run, index) => getJson(base + "episode?run=" + encodeURIComponent(run.id) + "&index=" + index)
      };
    }
    const chunks = new Map();
    return {
      runs: () => getJson(base + "runs.json"),
      page: (run, page) => getJson(base + run.folder + "/index-" + pad(page) + ".json"),
      episode: async (run, index, chunkSize) => {
        const chunk = Math.floor(index / chunkSize);
        const key = run.folder + "/" + chunk;
        if (!chunks.has(key)) {
          if (chunks.size >= CHUNK_CACHE) chunks.delete(chunks.keys().next().value);
          chunks.set(key, getJson(base + run.folder + "/episodes-" + pad(chunk) + ".json"));
        }
        const document_ = await chunks.get(key);
        return document_.episodes[index - chunk * chunkSize];
      }
    };
  }

  const source = dataSource(host.dataset.source, host.dataset.root || "");
  const state = { meta: null, runs: [], lists: new Map(), run: null, compare: null, listPage: 0, filtered: [] };

  const status = el("p", { class: "eb-status", role: "status" });
  const runSelect = el("select", { id: "eb-run", onchange: () => selectRun(runSelect.value) });
  const compareSelect = el("select", { id: "eb-compare", onchange: () => selectCompare(compareSelect.value) });
  const splitSelect = el("select", { id: "eb-split", onchange: () => selectSplit(splitSelect.value) });
  const filters = {
    task: el("input", { id: "eb-task", type: "number", min: "0", inputmode: "numeric" }),
    success: el("select", { id: "eb-success" }),
    skill: el("select", { id: "eb-skill" }),
    failure: el("select", { id: "eb-failure" }),
    minTurns: el("input", { id: "eb-min-turns", type: "number", min: "0", placeholder: t("minTurns") }),
    maxTurns: el("input", { id: "eb-max-turns", type: "number", min: "0", placeholder: t("maxTurns") })
  };
  for (const input of Object.values(filters)) {
    input.addEventListener("input", () => { state.listPage = 0; renderList(); });
  }
  const count = el("span", { class: "eb-count", id: "eb-count" });
  const listBody = el("tbody");
  const list = el("table", { class: "eb-list", id: "eb-list" },
    el("thead", {}, el("tr", {}, ["episode", "task", "sample", "split", "success", "reward", "failure", "turns",
      "skills"].map((key) => el("th", {}, t(key))))), listBody);
  const pager = el("div", { class: "eb-pager" });
  const paneA = el("section", { class: "eb-pane", id: "eb-pane-a" }, el("p", { class: "eb-hint" }, t("pick")));
  const paneB = el("section", { class: "eb-pane", id: "eb-pane-b", hidden: true });

  function label(text, control) { return el("label", {}, el("span", {}, text), control); }

  host.classList.add("eb");
  host.append(
    el("div", { class: "eb-runs" }, label(t("split"), splitSelect), label(t("run"), runSelect),
      label(t("compare"), compareSelect)),
    el("div", { class: "eb-filters" },
      label(t("task"), filters.task), label(t("success"), filters.success),
      label(t("skill"), filters.skill), label(t("failure"), filters.failure),
      label(t("turns"), el("span", { class: "eb-range" }, filters.minTurns, "–", filters.maxTurns)), count),
    status, el("div", { class: "eb-list-wrap" }, list), pager,
    el("div", { class: "eb-viewer", id: "eb-viewer" }, paneA, paneB));

  function fillSelect(select, options, keep) {
    const previous = keep ? select.value : "";
    select.replaceChildren(...options.map(([value, text]) => el("option", { value: value }, text)));
    if (options.some(([value]) => value === previous)) select.value = previous;
  }

  function runOptions(select, withNone) {
    const groups = new Map();
    for (const run of state.runs.filter((r) => !splitSelect.value || splitOf(r) === splitSelect.value)) {
      if (!groups.has(run.run)) groups.set(run.run, []);
      groups.get(run.run).push(run);
    }
    const nodes = withNone ? [el("option", { value: "" }, t("none"))] : [];
    for (const [name, runs] of groups) {
      nodes.push(el("optgroup", { label: name }, runs.map((run) => el("option", { value: run.id },
        (run.part === "." ? "" : run.part + "/") + run.file + " · " + run.episodes
        + (run.split ? " · " + run.split : "")))));
    }
    select.replaceChildren(...nodes);
  }

  async function loadList(run) {
    if (state.lists.has(run.id)) return state.lists.get(run.id);
    const entry = { run: run, episodes: [], skills: {}, complete: false, pending: null };
    state.lists.set(run.id, entry);
    entry.pending = (async () => {
      for (let page = 0; page < run.pages; page++) {
        const document_ = await source.page(run, page);
        entry.episodes.push(...document_.episodes);
        Object.assign(entry.skills, document_.skills);
        if (state.run === run) renderFilters(entry, true);
      }
      entry.complete = true;
      if (state.run === run) renderList();
      return entry;
    })();
    entry.pending.catch((error) => showError(error));
    return entry;
  }

  function showError(error) {
    status.textContent = error.message;
    status.classList.add("eb-error");
  }

  function renderFilters(entry, keep) {
    fillSelect(filters.success, [["", t("any")], ["yes", t("yes")], ["no", t("no")], ["unscored", t("unscored")]],
      keep);
    const skillIds = Object.keys(entry.skills);
    fillSelect(filters.skill, [["", t("any")], ["-", t("noSkills")],
      ...skillIds.map((id) => [id, entry.skills[id] + " (" + id + ")"])], keep);
    const present = new Set(entry.episodes.map((e) => e.failure));
    fillSelect(filters.failure, [["", t("any")],
      ...state.meta.failure_classes.filter((name) => present.has(name)).map((name) => [name, failureText(name)])], keep);
    renderList();
  }

  function splitOf(run) { return run.split || ""; }

  function selectSplit(split) {
    splitSelect.value = split;
    runOptions(runSelect, false);
    runOptions(compareSelect, true);
    const keep = state.run && (!split || splitOf(state.run) === split);
    const first = runSelect.querySelector("option");
    if (keep) runSelect.value = state.run.id;
    else if (first) selectRun(first.value).catch(showError);
    if (state.compare) compareSelect.value = state.compare.id;
  }

  function matches(episode) {
    const task = filters.task.value.trim();
    if (task !== "" && episode.task_id !== Number(task)) return false;
    const success = filters.success.value;
    if (success === "yes" && episode.success !== true) return false;
    if (success === "no" && episode.success !== false) return false;
    if (success === "unscored" && episode.success !== null) return false;
    const skill = filters.skill.value;
    if (skill === "-" && episode.skills.length) return false;
    if (skill && skill !== "-" && !episode.skills.includes(skill)) return false;
    if (filters.failure.value && episode.failure !== filters.failure.value) return false;
    if (filters.minTurns.value !== "" && episode.turns < Number(filters.minTurns.value)) return false;
    if (filters.maxTurns.value !== "" && episode.turns > Number(filters.maxTurns.value)) return false;
    return true;
  }

  function renderList() {
    const entry = state.run && state.lists.get(state.run.id);
    if (!entry) return;
    state.filtered = entry.episodes.filter(matches);
    const pages = Math.max(1, Math.ceil(state.filtered.length / LIST_PAGE));
    state.listPage = Math.min(state.listPage, pages - 1);
    const rows = state.filtered.slice(state.listPage * LIST_PAGE, (state.listPage + 1) * LIST_PAGE);
    listBody.replaceChildren(...rows.map((episode) => el("tr", {
      class: "eb-row" + (episode.success ? " eb-ok" : ""), "data-index": episode.index, tabindex: "0",
      onclick: () => openEpisode(episode.index),
      onkeydown: (event) => { if (event.key === "Enter") openEpisode(episode.index); }
    },
    el("td", {}, episode.episode_id), el("td", {}, episode.task_id), el("td", {}, episode.sample_id),
    el("td", {}, splitOf(state.run) || "—"),
    el("td", {}, episode.success === null ? t("unscored") : t(episode.success ? "yes" : "no")),
    el("td", {}, number(episode.reward)), el("td", {}, failureText(episode.failure)), el("td", {}, episode.turns),
    el("td", { class: "eb-skills" }, episode.skills.map((id) => entry.skills[id] || id).join("; ")))));
    count.textContent = t("shown", { n: state.filtered.length, total: entry.episodes.length })
      + (entry.complete ? "" : " · " + t("loaded", { n: entry.episodes.length, total: entry.run.episodes }));
    pager.replaceChildren(
      el("button", { type: "button", class: "eb-prev-page", disabled: state.listPage === 0,
        onclick: () => { state.listPage--; renderList(); } }, t("previous")),
      el("span", {}, t("pageOf", { page: state.listPage + 1, pages: pages })),
      el("button", { type: "button", class: "eb-next-page", disabled: state.listPage >= pages - 1,
        onclick: () => { state.listPage++; renderList(); } }, t("next")));
  }

  async function selectRun(id) {
    state.run = state.runs.find((run) => run.id === id) || null;
    if (!state.run) return;
    runSelect.value = id;
    state.listPage = 0;
    const entry = await loadList(state.run);
    renderFilters(entry, false);
  }

  function selectCompare(id) {
    state.compare = state.runs.find((run) => run.id === id) || null;
    compareSelect.value = id;
    paneB.hidden = !state.compare;
    viewer.classList.toggle("eb-side-by-side", Boolean(state.compare));
    if (state.compare) loadList(state.compare).catch(showError);
    if (state.compare && state.opened) openCompare(state.opened);
  }

  const viewer = paneA.parentElement;

  async function openEpisode(index) {
    const run = state.run;
    try {
      const episode = await source.episode(run, index, state.meta.chunk_size);
      state.opened = episode;
      renderPane(paneA, run, episode, 0);
      history.replaceState(null, "", "#run=" + encodeURIComponent(run.id) + "&episode=" + index);
      if (state.compare) await openCompare(episode);
    } catch (error) {
      showError(error);
    }
  }

  async function openCompare(episode, chosen) {
    const run = state.compare;
    const entry = await loadList(run);
    await entry.pending;
    const task = episode.summary.task_id;
    const same = entry.episodes.filter((e) => e.task_id === task);
    if (!same.length) {
      paneB.replaceChildren(el("h3", {}, run.id), el("p", { class: "eb-hint" }, t("notInRun", { task: task })));
      return;
    }
    const pick = chosen !== undefined ? same.find((e) => e.index === chosen)
      : same.find((e) => e.sample_id === episode.summary.sample_id) || same[0];
    const other = await source.episode(run, pick.index, state.meta.chunk_size);
    renderPane(paneB, run, other, 0, same);
  }

  function block(title, ...body) {
    return el("div", { class: "eb-block" }, el("h4", {}, title), ...body);
  }

  function pre(text, cls) { return el("pre", { class: cls || "eb-pre" }, text === null ? "—" : text); }

  function turnPanel(episode, step) {
    const turn = episode.turns[step];
    const previous = step > 0 ? episode.turns[step - 1] : null;
    const seen = previous
      ? block(t("seen") + (previous.page_type ? " · " + previous.page_type : ""), pre(previous.observation))
      : block(t("seen"), el("p", {}, t("initial")), el("p", {}, el("strong", {}, t("instruction") + ": "),
        episode.task_instruction || "—"));
    const errors = [];
    if (turn.parse_error) errors.push(el("p", { class: "eb-bad" }, t("parseError") + ": " + turn.parse_error));
    if (turn.protocol_error) {
      errors.push(el("p", { class: "eb-bad" }, t("protocolError") + ": " + turn.protocol_error));
    }
    const feedback = turn.feedback === null || turn.feedback === undefined ? "—"
      : typeof turn.feedback === "string" ? turn.feedback : JSON.stringify(turn.feedback, null, 1);
    return el("div", { class: "eb-turn", "data-step": step }, seen,
      block(t("reply"), pre(turn.raw_output)),
      turn.reasoning ? block(t("reasoning"), pre(turn.reasoning)) : null,
      block(t("action"), el("p", { class: "eb-action" }, turn.action || t("noAction")), ...errors),
      block(t("feedback"), el("p", {}, turn.valid === null ? "—" : t(turn.valid ? "valid" : "invalid"),
        turn.page_type ? " · " + t("pageType") + ": " + turn.page_type : ""), pre(feedback)),
      block(t("tokens"), el("p", {}, t("prompt") + " " + turn.prompt_tokens + " · " + t("completion") + " "
        + turn.completion_tokens + " · " + t("finish") + " " + turn.finish_reason)));
  }

  function finalPanel(episode) {
    const final = episode.final;
    const reward = final.reward || {};
    const rewardTable = el("table", { class: "eb-reward" },
      el("tr", {}, REWARD_PARTS.map((name) => el("th", {}, name))),
      el("tr", {}, REWARD_PARTS.map((name) => el("td", {}, number(reward[name])))));
    const purchase = final.purchase;
    const goal = final.private_goal || {};
    const goalRows = GOAL_FIELDS.filter((name) => goal[name] !== undefined && goal[name] !== null)
      .map((name) => el("tr", {}, el("th", {}, name), el("td", {},
        Array.isArray(goal[name]) ? goal[name].join("; ") : String(goal[name]))));
    return el("div", { class: "eb-final" },
      block(t("finalStep"), el("p", {}, t("status") + ": " + final.status + " · " + t("termination") + ": "
        + (final.termination_reason || "—") + " · " + t("failure") + ": " + failureText(episode.summary.failure)),
      rewardTable),
      block(t("purchase"), purchase ? el("p", {}, purchase.asin + " · " + (purchase.name || "") + " · "
        + number(purchase.price, 2) + (purchase.options ? " · " + JSON.stringify(purchase.options) : ""))
        : el("p", {}, t("noPurchase"))),
      final.error ? block(t("error"), pre(final.error)) : null,
      block(t("goal"), goalRows.length ? el("table", { class: "eb-goal" }, goalRows) : el("p", {}, "—")));
  }

  function skillTitle(skill) {
    const page = (state.meta.skill_pages || {})[skill.sha256];
    if (!page) return el("span", { class: "eb-skill-title" }, skill.title);
    const [path, anchor] = page.split("#");
    return el("a", { class: "eb-skill-page", href: (host.dataset.root || "") + "../" + path + "." + lang + ".html#"
      + anchor }, skill.title);
  }

  function renderPane(pane, run, episode, step, sameTask) {
    const summary = episode.summary;
    const steps = episode.turns.length;
    const position = step < steps ? t("turnOf", { turn: step + 1, turns: steps }) : t("finalStep");
    const go = (next) => renderPane(pane, run, episode, Math.max(0, Math.min(steps, next)), sameTask);
    pane.go = go;
    pane.step = step;
    pane.replaceChildren(...[
      el("h3", {}, summary.episode_id, el("small", {}, " · " + run.id)),
      el("p", { class: "eb-meta" }, t("task") + " " + summary.task_id + " · " + t("sample") + " " + summary.sample_id
        + " · " + t("model") + " " + (episode.model_id || "—") + " · " + t("seed") + " " + number(episode.seed)),
      el("p", {}, el("strong", {}, t("instruction") + ": "), episode.task_instruction || "—"),
      episode.skills.length ? el("div", { class: "eb-skill-list" },
        el("p", {}, t("skills") + ": ", episode.skills.flatMap((s, i) => (i ? ["; ", skillTitle(s)] : [skillTitle(s)]))),
        el("details", {}, el("summary", {}, t("skillTexts")), episode.skills.map((s) => el("div", {
          class: "eb-skill", "data-skill": s.id }, el("strong", {}, s.title), pre(s.content)))))
        : el("p", {}, t("skills") + ": " + t("noSkills")),
      sameTask && sameTask.length > 1 ? label(t("sameTask"), el("select", { class: "eb-same-task",
        onchange: (event) => openCompare(state.opened, Number(event.target.value)) },
      sameTask.map((e) => el("option", { value: e.index, selected: e.index === summary.index },
        e.episode_id)))) : null,
      el("div", { class: "eb-stepper" },
        el("button", { type: "button", class: "eb-step-prev", disabled: step === 0, onclick: () => go(step - 1) },
          t("previous")),
        el("span", { class: "eb-position" }, position),
        el("button", { type: "button", class: "eb-step-next", disabled: step >= steps,
          onclick: () => go(step + 1) }, t("next"))),
      step < steps ? turnPanel(episode, step) : finalPanel(episode)].filter(Boolean));
  }

  document.addEventListener("keydown", (event) => {
    if (!paneA.go || ["INPUT", "SELECT", "TEXTAREA"].includes(document.activeElement.tagName)) return;
    if (event.key === "ArrowRight") paneA.go(paneA.step + 1);
    if (event.key === "ArrowLeft") paneA.go(paneA.step - 1);
  });

  async function start() {
    status.textContent = t("loading");
    try {
      state.meta = await source.runs();
    } catch (error) {
      showError(error);
      return;
    }
    state.runs = state.meta.runs;
    status.textContent = "";
    if (!state.runs.length) {
      status.textContent = t("noRuns");
      return;
    }
    const splits = [...new Set(state.runs.map(splitOf))].filter(Boolean).sort();
    fillSelect(splitSelect, [["", t("any")], ...splits.map((s) => [s, s])], false);
    runOptions(runSelect, false);
    runOptions(compareSelect, true);
    const hash = new URLSearchParams(location.hash.slice(1));
    const wanted = state.runs.find((run) => run.id === hash.get("run")) || state.runs[0];
    await selectRun(wanted.id);
    if (hash.has("episode")) await openEpisode(Number(hash.get("episode")));
  }

  start();
}());
