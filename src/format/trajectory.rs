//! mini-swe-agent trajectories (`.traj.json`): `{"messages": [OpenAI Chat messages], "info",
//! "trajectory_format", ...}`.

use super::FormatError;
use crate::conversation::Conversation;
use serde_json::Value;

/// True when the value looks like a trajectory object.
pub fn is_trajectory(value: &Value) -> bool {
    value.get("trajectory_format").is_some() && value.get("messages").is_some()
}

/// Imports a trajectory as an OpenAI Chat conversation.
///
/// # Errors
/// [`FormatError`] naming the malformed message.
pub fn import(value: &Value) -> Result<Conversation, FormatError> {
    super::openai_chat::read(value)
}
