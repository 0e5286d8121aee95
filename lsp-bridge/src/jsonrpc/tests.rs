use super::*;

fn refused(body: &[u8]) -> Refusal {
    match decode(body) {
        Err(refusal) => refusal,
        Ok(message) => panic!("{} was taken as {message:?}", String::from_utf8_lossy(body)),
    }
}

#[test]
fn envelopes_are_told_apart() {
    let request = decode(br#"{"jsonrpc":"2.0","id":1,"method":"a","params":{"x":1}}"#).unwrap();
    assert_eq!(
        request,
        Message::Request {
            id: json!(1),
            method: "a".into(),
            params: json!({"x": 1})
        }
    );
    let notification = decode(br#"{"jsonrpc":"2.0","method":"b"}"#).unwrap();
    assert_eq!(
        notification,
        Message::Notification {
            method: "b".into(),
            params: Value::Null
        }
    );
    let failed =
        decode(br#"{"jsonrpc":"2.0","id":"k","error":{"code":-32601,"message":"no"}}"#).unwrap();
    assert_eq!(
        failed,
        Message::Response {
            id: json!("k"),
            outcome: Err(ResponseError::new(code::METHOD_NOT_FOUND, "no"))
        }
    );
}

#[test]
fn invalid_utf8_is_answered_to_the_requests_id() {
    let refusal =
        refused(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\",\"params\":{\"a\":\"\xff\xfe\"}}");
    let [answer] = &refusal.answers[..] else {
        panic!("{refusal:?}")
    };
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["error"]["code"], code::PARSE_ERROR);
    assert!(
        refusal.problem.contains("not valid UTF-8 (byte 52"),
        "{}",
        refusal.problem
    );
    // A notification gets no answer; the problem is still told.
    let refusal = refused(b"{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":\"\xff\"}");
    assert!(refusal.answers.is_empty());
    // Nothing readable: an answer to `null`, as JSON-RPC says.
    let refusal = refused(b"{\"id\":3, \"method\":");
    assert_eq!(refusal.answers[0]["id"], Value::Null);
}

#[test]
fn a_lone_surrogate_is_read_as_a_replacement_character() {
    let message = decode(br#"{"jsonrpc":"2.0","id":8,"method":"x","params":{"a":"1\ud800 2\udc00 \\ud800 \ud83d\ude00"}}"#)
        .unwrap();
    let Message::Request { params, .. } = message else {
        panic!("{message:?}")
    };
    // The pair stays a pair, and an escaped backslash is not the start of an escape.
    assert_eq!(params["a"], "1\u{fffd} 2\u{fffd} \\ud800 \u{1f600}");
    // Both count one UTF-16 unit, so positions after them do not move.
    assert_eq!("\u{fffd}".encode_utf16().count(), 1);
}

#[test]
fn a_batch_gets_an_error_of_its_own_for_each_request() {
    let refusal = refused(
        br#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"two","method":"b"}]"#,
    );
    let answers = &refusal.answers;
    assert_eq!(answers.len(), 2);
    assert_eq!(answers[0]["id"], 1);
    assert_eq!(answers[1]["id"], "two");
    assert_eq!(answers[1]["error"]["code"], code::INVALID_REQUEST);
    // Nothing to answer by id: one error to `null`.
    for batch in [&b"[]"[..], br#"[{"jsonrpc":"2.0","method":"n"}]"#] {
        let answers = refused(batch).answers;
        assert_eq!(answers.len(), 1);
        assert_eq!(answers[0]["id"], Value::Null, "{answers:?}");
    }
}

#[test]
fn bad_envelopes_are_invalid_requests() {
    for body in [
        &br#"5"#[..],
        br#"{"jsonrpc":"2.0"}"#,
        br#"{"id":{"a":1},"method":"x"}"#,
        br#"{"id":1,"method":7}"#,
    ] {
        let refusal = refused(body);
        let answer = &refusal.answers[0];
        assert_eq!(answer["error"]["code"], code::INVALID_REQUEST, "{answer}");
    }
    assert_eq!(refused(br#"{"id":1,"method":7}"#).answers[0]["id"], 1);
    // A response with a bad id cannot be answered.
    assert!(refused(br#"{"id":[1],"result":1}"#).answers.is_empty());
}
