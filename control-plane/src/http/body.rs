//! Reading a request body whole within a byte limit, frame by frame: 413 past the limit, 400 when the body breaks
//! off, and a caller's own check as it grows (the capture path's byte budget). Used where a body is read after
//! the caller is known (job reports, captures), not through axum's body limit.

use crate::error::{ApiError, ApiResult};
use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt as _;

/// Reads `body` whole within `limit` bytes; past it answers `too_large()`. `grown` sees the size read so far after
/// each frame; its refusal ends the read once the rest of the body (as much as the limit leaves) is read and
/// dropped ([`discard`]). A body in one frame is kept as it came (not copied); a body in several is copied frame by
/// frame into one buffer sized by its declared length (within `limit`), each frame dropped once copied, so a large
/// body is whole in memory once, never as its frames and their join at the same time.
pub async fn read_within(
    mut body: Body,
    limit: usize,
    too_large: impl FnOnce() -> ApiError,
    mut grown: impl FnMut(usize) -> ApiResult<()>,
) -> ApiResult<Bytes> {
    let declared = usize::try_from(http_body::Body::size_hint(&body).lower()).unwrap_or(0).min(limit);
    let (mut first, mut joined, mut size) = (None::<Bytes>, None::<BytesMut>, 0usize);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| ApiError::invalid("the request body could not be read"))?;
        let Ok(data) = frame.into_data() else { continue };
        size += data.len();
        if size > limit {
            return Err(too_large());
        }
        if let Err(refusal) = grown(size) {
            drop((first, joined));
            return Err(discard(body, limit - size, refusal).await);
        }
        match (&mut joined, first.take()) {
            (Some(buffer), _) => buffer.extend_from_slice(&data),
            (None, None) => first = Some(data),
            (None, Some(previous)) => {
                let mut buffer = BytesMut::with_capacity(declared.max(size));
                buffer.extend_from_slice(&previous);
                buffer.extend_from_slice(&data);
                joined = Some(buffer);
            }
        }
    }
    Ok(match (joined, first) {
        (Some(buffer), _) => buffer.freeze(),
        (None, Some(only)) => only,
        (None, None) => Bytes::new(),
    })
}

/// Reads the rest of a refused body without keeping it (up to `limit` bytes more), so the sender, still sending,
/// reads the refusal instead of a reset connection; answers `refusal`.
pub async fn discard(mut body: Body, limit: usize, refusal: ApiError) -> ApiError {
    let mut left = limit;
    while let Some(Ok(frame)) = body.frame().await {
        let Ok(data) = frame.into_data() else { continue };
        if data.len() > left {
            break;
        }
        left -= data.len();
    }
    refusal
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookflow_shared::ErrorCode;

    fn chunked(frames: &[&'static [u8]]) -> Body {
        let frames: Vec<Result<Bytes, std::io::Error>> = frames.iter().map(|f| Ok(Bytes::from_static(f))).collect();
        Body::from_stream(futures_util::stream::iter(frames))
    }

    fn too_large() -> ApiError {
        ApiError::new(ErrorCode::PayloadTooLarge, "too large")
    }

    #[tokio::test]
    async fn bodies_are_read_whole_within_the_limit() {
        let read = read_within(chunked(&[b"ab", b"cd"]), 4, too_large, |_| Ok(())).await.expect("within");
        assert_eq!(&read[..], b"abcd");
        let refused = read_within(chunked(&[b"ab", b"cde"]), 4, too_large, |_| Ok(())).await.expect_err("over");
        assert_eq!(refused.code, ErrorCode::PayloadTooLarge);
        let mut seen = Vec::new();
        let grown = |size| {
            seen.push(size);
            if size > 2 { Err(ApiError::invalid("no room")) } else { Ok(()) }
        };
        let refused = read_within(chunked(&[b"ab", b"cd", b"ef"]), 10, too_large, grown).await.expect_err("no room");
        assert_eq!((refused.message.as_str(), seen), ("no room", vec![2, 4]));
    }
}
