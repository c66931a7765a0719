//! Short questions on a kiosk's small corpus (the committed museum demo index, 52
//! passages): those it answers, whose top passage is right, are "ok"; off-topic ones
//! are "low" — at the default k and at k = 1 (docs/confidence.md: how the confidence
//! behaves with question length on kiosk-like corpora of the dev set).

mod common;

const ANSWERED: [(&str, &str); 8] = [
    ("where are the toilets", "toilets-baby-changing"),
    ("are dogs allowed", "dogs-and-assistance-animals"),
    ("can I take photos", "photography"),
    ("do you have lockers", "lockers-cloakroom"),
    ("is there wifi", "wifi"),
    ("is it open on monday", "opening-hours"),
    ("how much are tickets", "ticket-prices"),
    ("when does the museum open", "opening-hours"),
];

const OFF_TOPIC: [&str; 5] = [
    "what is the capital of France",
    "how tall is mount everest",
    "who wrote hamlet",
    "who won the world cup",
    "what is the boiling point of tungsten",
];

#[test]
fn short_museum_questions_pass_and_short_off_topic_ones_are_flagged() {
    let mut input = String::new();
    for q in ANSWERED.iter().map(|a| a.0).chain(OFF_TOPIC) {
        input.push_str(&format!("{{\"id\": \"{q}\", \"text\": \"{q}\"}}\n"));
    }
    for k in ["10", "1"] {
        let out = common::on_demo(&["search", "--k", k], input.as_bytes());
        let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), ANSWERED.len() + OFF_TOPIC.len());
        for (line, (q, top)) in lines.iter().zip(ANSWERED) {
            assert_eq!(line["results"][0]["id"], top, "k = {k}: {q}");
            assert_eq!(
                line["evidence"], "ok",
                "k = {k}: {q}: {}",
                line["confidence"]
            );
        }
        for (line, q) in lines[ANSWERED.len()..].iter().zip(OFF_TOPIC) {
            assert_eq!(
                line["evidence"], "low",
                "k = {k}: {q}: {}",
                line["confidence"]
            );
        }
    }
}
