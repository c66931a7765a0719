//! The evaluation's outputs: a one-screen text summary, a Markdown report with the
//! study's figures alongside primd's, and the plots, written into one directory.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;

use super::metrics::{CADENCES, HEADLINE_K, KS, LATENCIES_MS, PhiDist, THETAS};
use super::prefix::{HEADLINE_POINT, PrefixSummary};
use super::streams::{ModeSummary, StreamSummary, SweepPoint};
use super::{EvalReport, EvalRun, RetrieverReport, svg};

/// The study's figures (seeds/002: CRAG, BM25 over 120-word chunks).
pub const STUDY_PHI_SUF_MEAN_K3: f64 = 0.26;
pub const STUDY_PHI_SUF_MEDIAN_K3: f64 = 0.14;
pub const STUDY_PHI_SC_MEAN: f64 = 0.67;
pub const STUDY_FAVOURABLE: f64 = 0.213;
pub const STUDY_STREAMABLE_ALL: f64 = 0.739;
pub const STUDY_STREAMABLE_FAVOURABLE: f64 = 0.952;
pub const STUDY_STREAMABLE_FALLBACK: f64 = 0.681;

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.digits$}"))
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{:.1}%", v * 100.0))
}

fn suf(p: &PrefixSummary, k: usize) -> Option<&super::prefix::SufficiencySummary> {
    p.sufficiency.iter().find(|s| s.k == k)
}

/// A few lines for the terminal.
pub fn summary_text(r: &EvalReport) -> String {
    let mut s = String::new();
    let first = r.retrievers.first();
    let _ = writeln!(
        s,
        "primd eval: {} queries ({} prefixes, {} distinct) over {} passages in {:.0} s \
         (prefixes {:.0} s, streams {:.0} s, sweep {:.0} s)",
        first.map_or(0, |x| x.prefix.queries),
        first.map_or(0, |x| x.prefix.prefixes),
        first.map_or(0, |x| x.prefix.unique_prefixes),
        r.passages,
        r.seconds.total,
        r.seconds.prefix,
        r.seconds.streams,
        r.seconds.sweep
    );
    for section in &r.retrievers {
        if r.retrievers.len() > 1 {
            let _ = writeln!(s, "[{}]", section.retriever);
        }
        summary_section(&mut s, section);
    }
    if let Some(t) = &r.trigger_training {
        let l = &t.labels;
        let _ = writeln!(
            s,
            "  trigger training: {} typed questions ({} stream questions left out), {} labels: \
             NEW_QUERY {} ({:.1}%), NO_QUERY {}; {} negative samples ({} NEW_QUERY); \
             thresholds {:.2} / {:.2} (partials / final{}), training accuracy {:.3}",
            t.questions,
            t.left_out_stream_questions,
            l.rows,
            l.new_query,
            l.new_query_share * 100.0,
            l.no_query,
            l.negative_samples,
            l.negative_new_query,
            t.threshold.0,
            t.threshold.1,
            if t.conditions_met {
                ""
            } else {
                "; NO pair met the hit@10 and latency conditions"
            },
            t.train_accuracy
        );
        let points = t.typed.iter().map(|p| ("typed", "question", p));
        for (on, per, p) in points.chain(t.streams.iter().map(|p| ("streams", "utterance", p))) {
            let _ = writeln!(
                s,
                "    {on} {}: embeds {:.2} + searches {:.2} per {per}, hit@1 {:.3} hit@10 {:.3}, finals embedded {:.1}%",
                p.threshold.map_or("fixed".to_string(), |t| format!(
                    "learned {:.2}/{:.2}",
                    t.0, t.1
                )),
                p.embeds_per_question,
                p.speculative_searches_per_question,
                p.hit1,
                p.hit10,
                p.final_embedded * 100.0
            );
        }
    }
    if let Some(sw) = &r.sweep {
        let _ = writeln!(
            s,
            "  sweep Pareto front (trigger_interval × similarity_threshold → spec/utt, hit@10, p50 ms):"
        );
        for p in sw.iter().filter(|p| p.pareto) {
            let _ = writeln!(
                s,
                "    {} × {:.2} → {:.1}, {:.3}, {:.3}",
                p.trigger_interval,
                p.similarity_threshold,
                p.speculative_searches_per_utterance,
                p.hit10,
                p.p50_ms
            );
        }
    }
    s
}

fn summary_section(s: &mut String, section: &RetrieverReport) {
    if let Some(c) = &section.context {
        let sets = [("typed", Some(&c.typed)), ("streams", c.streams.as_ref())];
        for (name, sum) in sets.into_iter().filter_map(|(n, x)| x.map(|x| (n, x))) {
            let _ = writeln!(
                s,
                "  answer in context, {name} ({} questions): {}",
                sum.questions,
                sum.rows
                    .iter()
                    .map(|r| format!("{} {:.3} ({:.0} tok)", r.what, r.answer_rate, r.mean_tokens))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    if let Some(c) = &section.trigger {
        for (name, m) in [("fixed", &c.fixed), ("learned", &c.learned)] {
            let _ = writeln!(
                s,
                "  trigger {name:<7}: embeds {:.2} + spec. searches {:.2} per utterance, hit@1 {:.3} hit@10 {:.3}, \
                 eou→result p50 {:.3} p90 {:.3} p99 {:.3} ms",
                m.embeds_per_utterance,
                m.speculative_searches_per_utterance,
                m.hit1,
                m.hit10,
                m.latency_ms.p50,
                m.latency_ms.p90,
                m.latency_ms.p99
            );
        }
        let _ = writeln!(
            s,
            "  learned/fixed cost {:.3} (thresholds {:.2} / {:.2}); relevant lost {}, gained {}",
            c.cost_ratio, c.threshold.0, c.threshold.1, c.lost_relevant, c.gained_relevant
        );
    }
    let p = &section.prefix;
    if p.skipped_no_relevant + p.skipped_empty > 0 {
        let _ = writeln!(
            s,
            "  skipped: {} without a relevant passage in the index, {} empty",
            p.skipped_no_relevant, p.skipped_empty
        );
    }
    let _ = writeln!(
        s,
        "  φ_sc (top-1 stable)  mean {} median {}   [study, BM25: mean {STUDY_PHI_SC_MEAN}]",
        opt(p.phi_sc.mean, 2),
        opt(p.phi_sc.median, 2)
    );
    for k in KS {
        if let Some(x) = suf(p, k) {
            let _ = writeln!(
                s,
                "  φ_suf top-{k:<2}         mean {} median {} on the favourable slice ({}){}",
                opt(x.phi_suf.mean, 2),
                opt(x.phi_suf.median, 2),
                pct(Some(x.favourable_fraction)),
                if k == HEADLINE_K {
                    format!(
                        "   [study: {STUDY_PHI_SUF_MEAN_K3} / {STUDY_PHI_SUF_MEDIAN_K3} on {:.1}%]",
                        STUDY_FAVOURABLE * 100.0
                    )
                } else {
                    String::new()
                }
            );
        }
    }
    let (l, d, t) = HEADLINE_POINT;
    if let Some(c) = p.cell(l, d, t) {
        let _ = writeln!(
            s,
            "  streamable at L={l} ms δ={d} w/s θ={t}: {} (favourable {}, fallback {})   [study: {:.1}% ({:.1}%, {:.1}%)]",
            pct(Some(c.all)),
            pct(c.favourable),
            pct(c.fallback),
            STUDY_STREAMABLE_ALL * 100.0,
            STUDY_STREAMABLE_FAVOURABLE * 100.0,
            STUDY_STREAMABLE_FALLBACK * 100.0
        );
    }
    if let Some(st) = &section.streams {
        let _ = writeln!(s, "  real streams: {} utterances", st.utterances);
        for (name, m) in [("baseline", &st.baseline), ("streaming", &st.streaming)] {
            let _ = writeln!(
                s,
                "    {name:<9} hit@1 {:.3} hit@10 {:.3}  eou→result p50 {:.3} p90 {:.3} p99 {:.3} ms  spec/utt {:.1}",
                m.hit1,
                m.hit10,
                m.latency_ms.p50,
                m.latency_ms.p90,
                m.latency_ms.p99,
                m.speculative_searches_per_utterance
            );
            if let Some(c) = &m.read_ahead_covered {
                let _ = writeln!(
                    s,
                    "              reader pairs/utt {:.1} ahead + {:.1} after end of speech; read ahead covered {} finals: eou→result p50 {:.3} p90 {:.3} ms",
                    m.pairs_read_per_utterance,
                    m.pairs_read_final_per_utterance,
                    c.utterances,
                    c.p50_ms,
                    c.p90_ms
                );
            }
        }
        let _ = writeln!(
            s,
            "    mis-fires {} (fell back to full {}, lost a relevant passage {}, gained {})",
            st.misfires, st.streaming.fell_back_to_full, st.lost_relevant, st.gained_relevant
        );
    }
}

fn dist_row(name: &str, d: &PhiDist, slice: &str, study: &str) -> String {
    format!(
        "| {name} | {slice} | {} | {} | {} | {study} |\n",
        d.count,
        opt(d.mean, 3),
        opt(d.median, 3)
    )
}

fn mode_row(name: &str, m: &ModeSummary) -> String {
    format!(
        "| {name} | {:.3} | {:.3} | reuse {:.0}%, rerank {:.0}%, full {:.0}%, lexical {:.0}% | {:.2} | {:.2} | {:.3} | {:.3} | {:.3} | {:.3} |\n",
        m.hit1,
        m.hit10,
        m.paths.reuse * 100.0,
        m.paths.rerank * 100.0,
        m.paths.full * 100.0,
        m.paths.lexical * 100.0,
        m.speculative_searches_per_utterance,
        m.gate_skips_per_utterance,
        m.latency_ms.p50,
        m.latency_ms.p90,
        m.latency_ms.p95,
        m.latency_ms.p99
    )
}

fn streams_md(md: &mut String, st: &StreamSummary, spec_n: usize, h: &str) {
    let _ = writeln!(md, "\n{h} Real recognizer streams\n");
    let _ = writeln!(
        md,
        "{} utterances ({} without a relevant passage in the index skipped). Each partial is \
         fed at its audio time, in the order of work the daemon would have at real time (a \
         virtual clock advanced by the measured work: the newest waiting event is taken, \
         idle embedding when nothing waits); latency is end of utterance → results: any \
         wait for work in progress plus the wall-clock time of `finalize`.\n",
        st.utterances, st.skipped_no_relevant
    );
    md.push_str("| mode | hit@1 | hit@10 | paths | spec. searches / utt. | gate skips / utt. | p50 ms | p90 | p95 | p99 |\n");
    md.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    md.push_str(&mode_row("baseline (`enabled = false`)", &st.baseline));
    md.push_str(&mode_row("streaming", &st.streaming));
    let s = &st.streaming;
    let _ = writeln!(
        md,
        "\n- Speculative candidates held a relevant passage in {} of utterances; the first such \
         scan came at {} s of audio (median), {} of the utterance on average.",
        pct(Some(s.relevant_in_speculation)),
        opt(s.first_relevant_s_median, 2),
        pct(s.first_relevant_fraction_mean)
    );
    let _ = writeln!(
        md,
        "- The last speculative top-{spec_n} already held {} of the final top-10 (mean).",
        pct(s.overlap_mean)
    );
    let _ = writeln!(
        md,
        "- Mis-fires: {} utterances ({} speculated but fell back to a full search; {} lost a \
         relevant passage the baseline had in its top-10; {} gained one).",
        st.misfires, s.fell_back_to_full, st.lost_relevant, st.gained_relevant
    );
    let _ = writeln!(
        md,
        "- Longest observe + idle work for one partial: {:.1} ms; shortest audio time between \
         an observed partial and the next event: {} ms. {:.2} partials per utterance were \
         superseded before they could be observed; {} finals waited for work in progress \
         (included in the latency).",
        s.max_partial_work_ms,
        opt(s.min_partial_gap_ms, 0),
        s.superseded_partials_per_utterance,
        s.final_waited
    );
}

fn sweep_md(md: &mut String, sw: &[SweepPoint]) {
    let _ = writeln!(md, "\n## Sweep: trigger_interval × similarity_threshold\n");
    md.push_str("| trigger_interval | similarity_threshold | spec. searches / utt. | embeds / utt. | gate skips / utt. | hit@1 | hit@10 | p50 ms | p90 ms | lost vs baseline | Pareto |\n");
    md.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for p in sw {
        let _ = writeln!(
            md,
            "| {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {} |",
            p.trigger_interval,
            p.similarity_threshold,
            p.speculative_searches_per_utterance,
            p.embeds_per_utterance,
            p.gate_skips_per_utterance,
            p.hit1,
            p.hit10,
            p.p50_ms,
            p.p90_ms,
            p.lost_relevant,
            if p.pareto { "**yes**" } else { "" }
        );
    }
    md.push_str(
        "\nPareto: no other setting has fewer speculative searches, a higher hit@10 and a lower \
         p50 at once. Latencies are wall clock on a shared machine: differences under ~0.1 ms \
         are noise.\n",
    );
}

/// The Markdown report.
pub fn markdown(run: &EvalRun) -> String {
    let r = &run.report;
    let first = r.retrievers.first().map(|x| &x.prefix);
    let mut md = String::new();
    let _ = writeln!(md, "# primd eval\n");
    let _ = writeln!(
        md,
        "Index `{}` ({} passages{}); {} queries with a relevant passage ({} word prefixes, {} \
         distinct, {} words per query on average). Settings: trigger_interval {}, \
         similarity_threshold {}, reflector_threshold {}, full_search_candidates {}. {:.0} s \
         ({:.0} s prefix replay, {:.0} s streams, {:.0} s sweep) on {} workers.\n",
        r.index,
        r.passages,
        r.model
            .as_deref()
            .map(|m| format!(", {m} model"))
            .unwrap_or_default(),
        first.map_or(0, |p| p.queries),
        first.map_or(0, |p| p.prefixes),
        first.map_or(0, |p| p.unique_prefixes),
        opt(first.and_then(|p| p.mean_words), 1),
        r.settings.trigger_interval,
        r.settings.similarity_threshold,
        r.settings.reflector_threshold,
        r.settings.full_search_candidates,
        r.seconds.total,
        r.seconds.prefix,
        r.seconds.streams,
        r.seconds.sweep,
        r.settings.workers
    );
    let set = &r.settings;
    let _ = writeln!(
        md,
        "Retrievers: {}; fusion {} (lexical_weight {}), lexical_candidates {}, revision_weight {}; stream replays {}.\n",
        r.retrievers
            .iter()
            .map(|x| x.retriever.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        set.fusion.as_str(),
        set.lexical_weight,
        set.lexical_candidates,
        set.revision_weight,
        if set.reader {
            "with the reader"
        } else {
            "without the reader"
        }
    );
    let many = r.retrievers.len() > 1;
    if many {
        compare_md(&mut md, &r.retrievers);
    }
    for (i, section) in r.retrievers.iter().enumerate() {
        let h = if many {
            let _ = writeln!(md, "\n# Retriever: {}\n", section.retriever);
            "###"
        } else {
            "##"
        };
        let suffix = plot_suffix(i, section);
        section_md(
            &mut md,
            section,
            r.settings.max_speculative_results,
            h,
            &suffix,
        );
    }
    if let Some(sw) = &r.sweep {
        sweep_md(&mut md, sw);
    }
    md
}

/// Plots of the first retriever keep the plain names; the others get `-NAME`.
fn plot_suffix(i: usize, section: &RetrieverReport) -> String {
    if i == 0 {
        String::new()
    } else {
        format!("-{}", section.retriever)
    }
}

/// One row per retriever: the headline measures side by side.
fn compare_md(md: &mut String, sections: &[RetrieverReport]) {
    let _ = writeln!(md, "## Retrievers side by side\n");
    md.push_str("| retriever | favourable (top-3) | φ_suf top-3 mean | φ_sc mean | streamable at 600 ms, 3 w/s, θ 0.8 | streams hit@1 | hit@10 | eou→result p50 ms | baseline hit@1 | hit@10 |\n");
    md.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    let (l, d, t) = HEADLINE_POINT;
    for x in sections {
        let p = &x.prefix;
        let s3 = suf(p, HEADLINE_K);
        let st = x.streams.as_ref();
        let f3 = |v: Option<f64>| opt(v, 3);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            x.retriever,
            pct(s3.map(|s| s.favourable_fraction)),
            f3(s3.and_then(|s| s.phi_suf.mean)),
            f3(p.phi_sc.mean),
            pct(p.cell(l, d, t).map(|c| c.all)),
            f3(st.map(|s| s.streaming.hit1)),
            f3(st.map(|s| s.streaming.hit10)),
            f3(st.map(|s| s.streaming.latency_ms.p50)),
            f3(st.map(|s| s.baseline.hit1)),
            f3(st.map(|s| s.baseline.hit10)),
        );
    }
}

/// The sections of one retriever, with headings at level `h`.
fn section_md(md: &mut String, section: &RetrieverReport, spec_n: usize, h: &str, suffix: &str) {
    let p = &section.prefix;
    let name = section.retriever;
    let _ = writeln!(
        md,
        "{h} Headline, next to the study (CRAG, BM25, 120-word chunks)\n"
    );
    let _ = writeln!(
        md,
        "| measure | primd ({name}) | study (BM25) |\n| --- | --- | --- |"
    );
    if let Some(x) = suf(p, HEADLINE_K) {
        let _ = writeln!(
            md,
            "| favourable slice (relevant in top-3 at the full query) | {} | {:.1}% |",
            pct(Some(x.favourable_fraction)),
            STUDY_FAVOURABLE * 100.0
        );
        let _ = writeln!(
            md,
            "| φ_suf at top-3 on that slice, mean / median | {} / {} | {STUDY_PHI_SUF_MEAN_K3} / {STUDY_PHI_SUF_MEDIAN_K3} |",
            opt(x.phi_suf.mean, 3),
            opt(x.phi_suf.median, 3)
        );
    }
    let _ = writeln!(
        md,
        "| φ_sc (top-1 stable), mean over all | {} | ≈ {STUDY_PHI_SC_MEAN} |",
        opt(p.phi_sc.mean, 3)
    );
    let (l, d, t) = HEADLINE_POINT;
    if let Some(c) = p.cell(l, d, t) {
        let _ = writeln!(
            md,
            "| streamable at L = {l} ms, δ = {d} w/s, θ = {t}: all | {} | {:.1}% |",
            pct(Some(c.all)),
            STUDY_STREAMABLE_ALL * 100.0
        );
        let _ = writeln!(
            md,
            "| … favourable slice (t* = t_suf) | {} | {:.1}% |",
            pct(c.favourable),
            STUDY_STREAMABLE_FAVOURABLE * 100.0
        );
        let _ = writeln!(
            md,
            "| … the rest (t* = t_sc) | {} | {:.1}% |",
            pct(c.fallback),
            STUDY_STREAMABLE_FALLBACK * 100.0
        );
    }
    let _ = writeln!(md, "\n{h} Stabilisation fractions\n");
    md.push_str("| measure | slice | queries | mean | median | study |\n| --- | --- | --- | --- | --- | --- |\n");
    md.push_str(&dist_row("φ_sc", &p.phi_sc, "all", "0.67 (mean)"));
    for x in &p.sufficiency {
        let study = if x.k == HEADLINE_K { "0.26 / 0.14" } else { "" };
        md.push_str(&dist_row(
            &format!("φ_suf top-{}", x.k),
            &x.phi_suf,
            &format!("favourable ({})", pct(Some(x.favourable_fraction))),
            study,
        ));
    }
    let _ = writeln!(md, "\n![φ histogram](phi{suffix}.svg)");
    let _ = writeln!(md, "\n{h} Streamable fraction (H ≥ θ·L)\n");
    let _ = writeln!(
        md,
        "t* = t_suf at top-{HEADLINE_K} on the favourable slice, t_sc on the rest (as in the study). All / favourable / rest:\n"
    );
    md.push_str("| θ | L ms | ");
    for d in CADENCES {
        let _ = write!(md, "δ = {d} w/s | ");
    }
    md.push_str("\n| --- | --- |");
    md.push_str(&" --- |".repeat(CADENCES.len()));
    md.push('\n');
    for theta in THETAS {
        for l in LATENCIES_MS {
            let _ = write!(md, "| {theta} | {l} |");
            for d in CADENCES {
                if let Some(c) = p.cell(l, d, theta) {
                    let _ = write!(
                        md,
                        " {} / {} / {} |",
                        pct(Some(c.all)),
                        pct(c.favourable),
                        pct(c.fallback)
                    );
                }
            }
            md.push('\n');
        }
    }
    let _ = writeln!(md, "\n![streamable heat map](streamable{suffix}.svg)");
    let _ = writeln!(md, "\n{h} By question type (first word)\n");
    md.push_str("| type | queries | favourable (top-3) | mean φ_suf top-3 | mean φ_sc | streamable at 600 ms, 3 w/s, θ 0.8 |\n| --- | --- | --- | --- | --- | --- |\n");
    for t in &p.by_type {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} |",
            t.qtype.as_str(),
            t.count,
            pct(Some(t.favourable_fraction)),
            opt(t.phi_suf_mean, 3),
            opt(t.phi_sc_mean, 3),
            pct(Some(t.streamable))
        );
    }
    if let Some(st) = &section.streams {
        streams_md(md, st, spec_n, h);
        let _ = writeln!(md, "\n![latency CDF](latency_cdf{suffix}.svg)");
    }
}

/// Writes `report.md`, `report.json`, the plots (per retriever: the first's under
/// plain names, the others' with `-NAME`), and `prefix_records.jsonl` (per retriever
/// and query: `retriever`, `id`, `qtype`, `n`, `t_sc`, `t_suf` and `favourable` at
/// k = 1, 3, 5, 10) into `dir` (created if needed).
pub fn write_dir(run: &EvalRun, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {dir:?}"))?;
    let write = |name: &str, body: &str| {
        let path = dir.join(name);
        std::fs::write(&path, body).with_context(|| format!("writing {path:?}"))
    };
    let mut records = String::new();
    for (i, (section, r)) in run.report.retrievers.iter().zip(&run.runs).enumerate() {
        let suffix = plot_suffix(i, section);
        let p = &section.prefix;
        let sc = p.phi_sc.histogram;
        let suf = suf(p, HEADLINE_K).map_or([0; super::metrics::PHI_BINS], |x| x.phi_suf.histogram);
        write(
            &format!("phi{suffix}.svg"),
            &svg::phi_histogram(
                &format!(
                    "When the query stabilises ({}): φ = t*/n",
                    section.retriever
                ),
                &[
                    ("φ_suf, top-3, favourable slice", suf),
                    ("φ_sc (top-1 stable), all", sc),
                ],
            ),
        )?;
        write(
            &format!("streamable{suffix}.svg"),
            &svg::streamable_heatmap(p),
        )?;
        if let Some((streaming, baseline)) = &r.stream_results {
            let lat = |v: &[super::streams::UttResult]| v.iter().map(|r| r.latency_ms).collect();
            write(
                &format!("latency_cdf{suffix}.svg"),
                &svg::latency_cdf(
                    &format!("End of utterance → results ({})", section.retriever),
                    &[("streaming", lat(streaming)), ("baseline", lat(baseline))],
                ),
            )?;
        }
        for rec in &r.prefix_records {
            let line = serde_json::json!({
                "retriever": section.retriever,
                "id": rec.id, "qtype": rec.qtype, "n": rec.n, "t_sc": rec.t_sc,
                "t_suf": rec.t_suf, "favourable": rec.favourable,
            });
            records.push_str(&line.to_string());
            records.push('\n');
        }
    }
    write("prefix_records.jsonl", &records)?;
    write("report.md", &markdown(run))?;
    write(
        "report.json",
        &(serde_json::to_string_pretty(&run.report)? + "\n"),
    )?;
    Ok(())
}
