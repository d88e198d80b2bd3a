"""Bilingual figure labels: one table maps each key to its English and Simplified Chinese text.

Mathtext (``$S_0$``) is used for symbols so that subscripts render with any font.
"""

from __future__ import annotations

LANGUAGES = ("en", "zh")

LABELS: dict[str, tuple[str, str]] = {
    # test results
    "title_test": ("Four-condition test (n = {n})", "四条件测试（n = {n}）"),
    "title_paired": ("Paired differences b − a", "配对差值 b − a"),
    "success_pct": ("test success (%)", "测试成功率（%）"),
    "reward_mean": ("mean strict reward", "平均严格奖励"),
    "delta_success": ("success difference, points (95% paired bootstrap CI)", "成功率差值（百分点，95% 配对自助法 CI）"),
    "delta_reward": ("reward difference (95% paired bootstrap CI)", "奖励差值（95% 配对自助法 CI）"),
    "arm_base_free": ("Base, no skill", "基座·无技能"),
    "arm_base_s0": ("Base + $S_0$", "基座 + $S_0$"),
    "arm_iter80_free": ("Iter80, no skill", "Iter80·无技能"),
    "arm_iter80_st": ("Iter80 + $S_T$", "Iter80 + $S_T$"),
    # training dynamics
    "title_training": ("Training dynamics per rollout step", "逐 rollout 步的训练动态"),
    "step": ("rollout step", "rollout 步"),
    "per_step": ("per step", "逐步"),
    "trailing_mean": ("{window}-step trailing mean", "{window} 步滑动平均"),
    "round_n": ("round {round}", "第 {round} 轮"),
    "round_short": ("R{round}", "R{round}"),
    "q_reference": ("q = {q}", "q = {q}"),
    "metric_reward_mean": ("mean reward", "平均奖励"),
    "metric_strict_reward_mean": ("mean strict reward", "平均严格奖励"),
    "metric_success_rate": ("success rate", "成功率"),
    "metric_skill_free_group_rate": ("skill-free group rate", "无技能组比例"),
    "metric_scored_rate": ("scored rate", "有效评分比例"),
    "metric_all_wrong_group_rate": ("all-wrong group rate", "全错组比例"),
    "metric_zero_std_group_drop_rate": ("zero-std drop rate", "零方差组丢弃率"),
    "metric_skills_per_assisted_group_mean": ("chunks per assisted group", "辅助组平均块数"),
    # skill evolution and contributions
    "title_skill_size": ("Skill-bank size per gate", "各轮门控后的技能库大小"),
    "title_gate_decisions": ("Gate decisions per round", "每轮门控决策"),
    "chunks_in_bank": ("chunks in bank", "技能库块数"),
    "interventions": ("interventions (design columns)", "干预数（设计列）"),
    "bank_label": ("$S_{index}$", "$S_{index}$"),
    "gate_round": ("gate round", "门控轮次"),
    "status_selected": ("selected", "入选"),
    "status_retired": ("retired", "淘汰"),
    "status_non_positive": ("non-positive β", "β 非正"),
    "status_rewrite_loser": ("rewrite loser", "改写落选"),
    "status_budget_excluded": ("over budget", "超出预算"),
    "kind_current": ("current", "现有"),
    "kind_candidate": ("candidate", "候选"),
    "title_contributions": ("Chunk contributions β per gate", "各轮门控的技能块贡献 β"),
    "beta": ("β (reward, no-intercept OLS)", "β（奖励，无截距 OLS）"),
    "ci_note": ("whiskers: 95% CI where standard errors exist", "须线：有标准误时的 95% 置信区间"),
    # behaviour
    "title_behaviour": ("Paired behaviour differences ({b} − {a})", "配对行为差值（{b} − {a}）"),
    "relative_delta": ("difference, % of reference mean (95% CI)", "差值（占参照均值的 %，95% CI）"),
    "title_phases": ("Per-turn statistic by page phase", "按页面阶段的逐轮统计"),
    "phase_value": ("per turn: mean (bar), p90 (marker)", "每轮：均值（柱），p90（标记）"),
    "phase_search_home": ("search (home)", "首页搜索"),
    "phase_search_results": ("results page", "结果页"),
    "phase_product_detail": ("product page", "商品详情页"),
    "phase_protocol_repair": ("protocol repair", "协议修复"),
    "behaviour_model_steps": ("model steps", "模型步数"),
    "behaviour_tokens_per_turn": ("tokens per turn", "每轮 token 数"),
    "behaviour_generated_tokens": ("generated tokens", "生成 token 数"),
    "behaviour_first_turn_tokens": ("first-turn tokens", "首轮 token 数"),
    "behaviour_searches": ("searches", "搜索次数"),
    "behaviour_unique_queries": ("unique queries", "不同查询数"),
    "behaviour_product_opens": ("product opens", "打开商品次数"),
    "behaviour_unique_products": ("unique products", "不同商品数"),
    "behaviour_product_revisits": ("product revisits", "商品回访次数"),
    "behaviour_backtracks": ("backtracks", "回退次数"),
    "behaviour_pagination": ("pagination", "翻页次数"),
    "behaviour_option_selections": ("option selections", "选项选择次数"),
    "behaviour_option_changes": ("option changes", "选项更改次数"),
    "behaviour_protocol_errors": ("protocol errors", "协议错误"),
    "behaviour_invalid_actions": ("invalid actions", "无效动作"),
    "behaviour_reasoning_chars_per_turn": ("reasoning chars per turn", "每轮推理字符数"),
    "behaviour_first_product_rank": ("first product rank", "首个商品排名"),
    "behaviour_actions": ("actions", "动作数"),
    "behaviour_valid_actions": ("valid actions", "有效动作数"),
    # optimization
    "title_optimization": ("Optimizer updates", "优化器更新"),
    "update": ("optimizer update", "优化器更新步"),
    "opt_entropy_loss": ("entropy", "熵"),
    "opt_pg_clipfrac": ("clip fraction", "裁剪比例"),
    "opt_grad_norm": ("gradient norm", "梯度范数"),
    "opt_ppo_kl": ("PPO KL (diagnostic)", "PPO KL（诊断）"),
    "opt_loss": ("loss", "损失"),
    "zero_grad": ("zero-gradient update", "零梯度更新"),
    # gate runs and gate validation
    "title_gate_outcomes": ("Validation success per gate", "各轮门控的验证集成功率"),
    "val_success_pct": ("val success (%)", "验证集成功率（%）"),
    "gate_bare": ("bare", "无技能"),
    "gate_masked": ("randomized masks", "随机掩码"),
    "title_gate_validation": ("Gate β vs ground-truth effect", "门控 β 与真实效应"),
    "title_gate_interactions": ("Pairwise interactions of the selected chunks", "所选块的两两交互"),
    "interaction_gamma": ("interaction γ (blank: not fitted)", "交互 γ（空白：未拟合）"),
    "true_effect": ("true effect on success (chunk alone − bare)", "对成功率的真实效应（单块 − 无技能）"),
    "gate_beta_success": ("gate β on success (95% CI)", "门控 β（成功率，95% CI）"),
    "identity_line": ("β = true effect", "β = 真实效应"),
    # the organism's warm start
    "title_cloning": ("Warm-start training loss", "热启动训练损失"),
    "training_step": ("training step", "训练步"),
    "training_loss": ("loss (masked tokens)", "损失（计损失的 token）"),
    "phase_drill": ("copy drills", "复制练习"),
    "phase_lm": ("next-token", "下一 token 预测"),
    "phase_bc": ("behaviour cloning", "行为克隆"),
    "title_chunk_effects": ("Each chunk alone vs bare (val, paired)", "单个技能块 vs 无技能（验证集，配对）"),
    "role_helpful": ("planted helpful", "预设有益"),
    "role_neutral": ("planted neutral", "预设中性"),
    "role_harmful": ("planted harmful", "预设有害"),
    # the control experiment
    "title_control_curves": ("Bare val success per round (mean, band: seeds' range)",
                             "逐轮无技能验证集成功率（均值，色带：各种子范围）"),
    "curve_warmstart": ("warm start", "热启动"),
    "curve_after_round": ("after round {round}", "第 {round} 轮后"),
    "title_control_levels": ("Test {metric} per arm ({condition})", "各实验组测试{metric}（{condition}）"),
    "title_control_contrasts": ("Arm differences ({condition}; 95% CI: seeds, then tasks)",
                                "组间差值（{condition}；95% CI：先种子后任务）"),
    "control_metric_success": ("success (%)", "成功率（%）"),
    "control_metric_reward": ("strict reward", "严格奖励"),
    "control_condition_deployed": ("deployed: final checkpoint + its bank", "部署：最终检查点 + 其技能库"),
    "control_condition_bare": ("final checkpoint, no skill", "最终检查点·无技能"),
    "control_delta_success": ("difference, points", "差值（百分点）"),
    "control_delta_reward": ("strict-reward difference", "严格奖励差值"),
}
"""key → (English, Simplified Chinese). Values may hold ``str.format`` fields."""


def label(key: str, language: str, **fields: object) -> str:
    """The label ``key`` in ``language`` (``"en"`` or ``"zh"``), formatted with ``fields``.

    Raises
    ------
    KeyError
        If ``key`` is not in :data:`LABELS`.
    ValueError
        If ``language`` is not one of :data:`LANGUAGES`.
    """
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    try:
        english, chinese = LABELS[key]
    except KeyError:
        raise KeyError(f"no figure label {key!r} in intraskill.plots.labels.LABELS") from None
    text = english if language == "en" else chinese
    return text.format(**fields) if fields else text


def label_or(key: str, language: str, default: str) -> str:
    """``label(key, language)`` when the key exists, else ``default`` (for open-ended metric names)."""
    return label(key, language) if key in LABELS else default
