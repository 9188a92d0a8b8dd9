//! The task state machine: the one function that says which moves are legal.

use crate::a2a::types::TaskState;

/// Whether a task may move from `from` to `to`. Terminal states are final;
/// nothing goes back to `submitted`; every other move between active and
/// interrupted states is allowed (including staying put with a new message).
pub fn can_move(from: TaskState, to: TaskState) -> bool {
    if from.is_terminal() {
        return false;
    }
    to != TaskState::Submitted || from == TaskState::Submitted
}

#[cfg(test)]
mod tests {
    use super::*;
    use TaskState::*;

    #[test]
    fn transition_table() {
        for from in TaskState::ALL {
            for to in TaskState::ALL {
                let expected = match (from, to) {
                    (Completed | Failed | Canceled | Rejected, _) => false,
                    (Submitted, Submitted) => true,
                    (_, Submitted) => false,
                    _ => true,
                };
                assert_eq!(can_move(from, to), expected, "{from:?} -> {to:?}");
            }
        }
        assert!(can_move(Working, InputRequired));
        assert!(can_move(InputRequired, Working));
        assert!(!can_move(Completed, Working));
    }
}
