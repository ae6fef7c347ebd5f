//! What blocks carry beside the conversation's text, as [`validate`](super::validate) checks
//! it: inline base64 image data (every format) and Anthropic `cache_control` breakpoints.

use super::Checker;
use crate::conversation::Block;
use crate::guard::cache;
use crate::guard::violation::ViolationKind;

impl<'a> Checker<'a> {
    /// Inline base64 images, at the top level of a message and inside tool results.
    pub(super) fn images(&mut self) {
        let mut found = Vec::new();
        for (i, j, b) in self.new_blocks() {
            let nested: Vec<&Block> = match b {
                Block::ToolResult(r) => match &r.content {
                    Some(crate::conversation::ToolResultContent::Blocks(bs)) => bs.iter().collect(),
                    _ => Vec::new(),
                },
                b => vec![b],
            };
            for nb in nested {
                if let Block::Image(v) = nb
                    && let Some(reason) = crate::tokens::image::image_data_fault(v)
                {
                    found.push((i, j, reason));
                }
            }
        }
        for (i, j, reason) in found {
            self.push(Some(i), Some(j), ViolationKind::BadImage { reason });
        }
    }

    /// Anthropic `cache_control` breakpoints (see [`cache`]).
    pub(super) fn breakpoints(&mut self) {
        // One scan: the sites counted are the ones checked for an empty text block.
        let (earlier, sites) = match self.seed {
            None => (0, cache::sites(self.conv)),
            Some(j) => (j.breakpoints, cache::sites_from(self.conv, self.from)),
        };
        let found = earlier + sites.len();
        self.breakpoints = found;
        if found > cache::MAX_BREAKPOINTS {
            self.push(None, None, ViolationKind::TooManyCacheBreakpoints { found });
        }
        let empty = sites.into_iter().filter(|s| cache::on_empty(self.conv, s));
        for site in empty {
            match site {
                cache::Site::Block { message, block, .. } => {
                    self.push(
                        Some(message),
                        Some(block),
                        ViolationKind::CacheControlOnEmptyText,
                    );
                }
                _ => self.push(None, None, ViolationKind::CacheControlOnEmptyText),
            }
        }
    }
}
