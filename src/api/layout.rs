//! Noncontiguous layouts (MPI's derived datatypes for RMA): which elements
//! of a buffer or of a window an operation touches, as a list of
//! contiguous blocks in the order the data is packed.

use crate::error::{Error, Result};

/// Where the elements of a noncontiguous transfer are, in elements of the
/// buffer or window (from the displacement the call gives): blocks of
/// consecutive elements, in the order the data travels. Built by
/// [`Layout::contiguous`], [`Layout::vector`] (MPI_Type_vector),
/// [`Layout::indexed`] (MPI_Type_indexed) and [`Layout::subarray`]
/// (MPI_Type_create_subarray, C order).
///
/// ```
/// # fn f() -> onesided::Result<()> {
/// use onesided::Layout;
/// // Column 3 of a 4 x 10 row-major array: 4 blocks of 1, stride 10.
/// let column = Layout::vector(4, 1, 10)?;
/// assert_eq!(column.blocks(), &[(0, 1), (10, 1), (20, 1), (30, 1)]);
/// assert_eq!((column.len(), column.extent()), (4, 31));
/// // The 2 x 3 block at (1, 2) of the same array.
/// let tile = Layout::subarray(&[4, 10], &[2, 3], &[1, 2])?;
/// assert_eq!(tile.blocks(), &[(12, 3), (22, 3)]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    blocks: Vec<(usize, usize)>,
    /// `blocks` as runs of equal blocks at a constant stride (computed
    /// once: the copy loops walk runs, not blocks).
    runs: Vec<Run>,
    len: usize,
    extent: usize,
}

/// Equal blocks at a constant stride: `count` blocks of `len` elements,
/// the first at element `at`, each `stride` (≥ `len`) after the previous.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    pub at: usize,
    pub len: usize,
    pub stride: usize,
    pub count: usize,
}

/// `blocks` (non-empty, non-overlapping) as the longest runs, in order.
fn runs_of(blocks: &[(usize, usize)]) -> Vec<Run> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < blocks.len() {
        let (at, len) = blocks[i];
        let (count, stride) = stride_run(&blocks[i..]);
        runs.push(Run {
            at,
            len,
            stride: stride.max(len),
            count,
        });
        i += count;
    }
    runs
}

/// The longest run of equal-length blocks at a constant, increasing stride
/// (at least the block length) at the start of `blocks` (not empty), as
/// (blocks, stride; 0 for one block).
fn stride_run(blocks: &[(usize, usize)]) -> (usize, usize) {
    let (at0, n) = blocks[0];
    let Some(&(at1, n1)) = blocks.get(1) else {
        return (1, 0);
    };
    if n1 != n || at1 < at0 + n {
        return (1, 0);
    }
    let stride = at1 - at0;
    let count = 2 + blocks[2..]
        .iter()
        .zip(&blocks[1..])
        .take_while(|(&(at, len), &(prev, _))| len == n && at.checked_sub(prev) == Some(stride))
        .count();
    (count, stride)
}

impl Layout {
    /// `n` consecutive elements.
    pub fn contiguous(n: usize) -> Layout {
        let blocks = if n == 0 { Vec::new() } else { vec![(0, n)] };
        Layout {
            runs: runs_of(&blocks),
            blocks,
            len: n,
            extent: n,
        }
    }

    /// `count` blocks of `blocklen` elements, block `i` starting at
    /// `i * stride` (MPI_Type_vector with a positive stride).
    ///
    /// # Errors
    /// `stride < blocklen` (blocks would overlap) or a size overflowing.
    pub fn vector(count: usize, blocklen: usize, stride: usize) -> Result<Layout> {
        if count > 1 && stride < blocklen {
            return Err(Error::InvalidArgument(format!(
                "vector layout: stride {stride} is smaller than the block length {blocklen}"
            )));
        }
        // The last block's end must fit (this also bounds the loop below).
        if count > 0 {
            let last = checked((count - 1).checked_mul(stride), "vector layout")?;
            checked(last.checked_add(blocklen), "vector layout")?;
            checked(count.checked_mul(blocklen), "vector layout")?;
        }
        if stride == blocklen || count <= 1 {
            return Ok(Self::contiguous(count * blocklen));
        }
        let blocks: Vec<_> = (0..count).map(|i| (i * stride, blocklen)).collect();
        Self::indexed(&blocks)
    }

    /// Blocks given as `(displacement, length)` in elements, in the order
    /// the data travels (MPI_Type_indexed). Empty blocks are dropped.
    ///
    /// # Errors
    /// A block whose end overflows.
    pub fn indexed(blocks: &[(usize, usize)]) -> Result<Layout> {
        let mut len = 0usize;
        let mut extent = 0usize;
        let mut out = Vec::with_capacity(blocks.len());
        for &(at, n) in blocks.iter().filter(|b| b.1 > 0) {
            let end = checked(at.checked_add(n), "indexed layout")?;
            len = checked(len.checked_add(n), "indexed layout")?;
            extent = extent.max(end);
            // Runs that continue the previous block travel as one.
            match out.last_mut() {
                Some((a, m)) if *a + *m == at => *m += n,
                _ => out.push((at, n)),
            }
        }
        Ok(Layout {
            runs: runs_of(&out),
            blocks: out,
            len,
            extent,
        })
    }

    /// The part `subsizes` starting at `starts` of a row-major (C order)
    /// array of shape `sizes` (MPI_Type_create_subarray with
    /// MPI_ORDER_C); any number of dimensions.
    ///
    /// # Errors
    /// Dimensions that differ in number, a part that does not fit in the
    /// array, or a size overflowing.
    pub fn subarray(sizes: &[usize], subsizes: &[usize], starts: &[usize]) -> Result<Layout> {
        let d = sizes.len();
        if subsizes.len() != d || starts.len() != d || d == 0 {
            return Err(Error::InvalidArgument(format!(
                "subarray layout: sizes, subsizes and starts need the same number (> 0) of \
                 dimensions, got {}, {} and {}",
                d,
                subsizes.len(),
                starts.len()
            )));
        }
        for k in 0..d {
            if starts[k].checked_add(subsizes[k]).is_none_or(|e| e > sizes[k]) {
                return Err(Error::InvalidArgument(format!(
                    "subarray layout: dimension {k}: {} elements from {} exceed its size {}",
                    subsizes[k], starts[k], sizes[k]
                )));
            }
        }
        // Element strides of each dimension (row-major).
        let mut strides = vec![1usize; d];
        for k in (0..d - 1).rev() {
            strides[k] = checked(strides[k + 1].checked_mul(sizes[k + 1]), "subarray layout")?;
        }
        if subsizes.contains(&0) {
            return Self::indexed(&[]);
        }
        // One block per row of the last dimension: walk the index space of
        // the first d - 1 dimensions like an odometer.
        let rows = subsizes[..d - 1]
            .iter()
            .try_fold(1usize, |a, &b| a.checked_mul(b));
        let rows = checked(rows, "subarray layout")?;
        // Every offset is below the array's size: it must fit.
        sizes
            .iter()
            .try_fold(1usize, |a, &b| a.checked_mul(b))
            .ok_or_else(|| {
                Error::InvalidArgument("subarray layout: the array's size overflows".into())
            })?;
        let mut blocks = Vec::with_capacity(rows);
        let mut index = vec![0usize; d - 1];
        for _ in 0..rows {
            let mut at = starts[d - 1];
            for k in 0..d - 1 {
                at += (starts[k] + index[k]) * strides[k];
            }
            blocks.push((at, subsizes[d - 1]));
            for k in (0..d - 1).rev() {
                index[k] += 1;
                if index[k] < subsizes[k] {
                    break;
                }
                index[k] = 0;
            }
        }
        Self::indexed(&blocks)
    }

    /// The blocks, `(displacement, length)` in elements, in transfer order
    /// (adjacent ones merged).
    pub fn blocks(&self) -> &[(usize, usize)] {
        &self.blocks
    }

    /// The blocks as runs of equal blocks at a constant stride, in order.
    pub(crate) fn runs(&self) -> &[Run] {
        &self.runs
    }

    /// Elements the layout holds (what travels).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the layout holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// One past the last element touched: the buffer or window must hold
    /// at least this many elements from the displacement.
    pub fn extent(&self) -> usize {
        self.extent
    }

    /// Gathers the elements of `buf` this layout names, in order.
    pub(crate) fn pack<T: Copy>(&self, buf: &[T]) -> Result<Vec<T>> {
        self.fits(buf.len(), "origin buffer")?;
        let mut out = Vec::with_capacity(self.len);
        for r in &self.runs {
            let run = &buf[r.at..r.at + r.stride * (r.count - 1) + r.len];
            match r.len {
                // One element per block (a column): a strided gather, no
                // copy call per block.
                1 => out.extend(run.iter().step_by(r.stride).copied()),
                n => {
                    for k in 0..r.count {
                        out.extend_from_slice(&run[k * r.stride..k * r.stride + n]);
                    }
                }
            }
        }
        Ok(out)
    }

    /// [`Layout::pack`], appended to `out` as bytes (the deferred puts of
    /// `api::window::deferred`).
    pub(crate) fn pack_bytes<T: bytemuck::Pod>(&self, buf: &[T], out: &mut Vec<u8>) -> Result<()> {
        self.fits(buf.len(), "origin buffer")?;
        let size = std::mem::size_of::<T>();
        let start = out.len();
        out.resize(start + self.len * size, 0);
        let mut dst = &mut out[start..];
        for r in &self.runs {
            let run = &buf[r.at..r.at + r.stride * (r.count - 1) + r.len];
            let (head, rest) = dst.split_at_mut(r.len * r.count * size);
            if r.len == 1 {
                // One element per block (a column): a strided gather.
                for (d, s) in head.chunks_exact_mut(size).zip(run.iter().step_by(r.stride)) {
                    d.copy_from_slice(bytemuck::bytes_of(s));
                }
            } else {
                for (k, d) in head.chunks_exact_mut(r.len * size).enumerate() {
                    d.copy_from_slice(bytemuck::cast_slice(&run[k * r.stride..k * r.stride + r.len]));
                }
            }
            dst = rest;
        }
        Ok(())
    }

    /// Scatters `packed` into the elements of `buf` this layout names.
    pub(crate) fn unpack<T: Copy>(&self, packed: &[T], buf: &mut [T]) -> Result<()> {
        self.fits(buf.len(), "origin buffer")?;
        let mut pos = 0;
        for &(at, n) in &self.blocks {
            let src = packed.get(pos..pos + n).ok_or_else(|| {
                Error::InvalidArgument("unpacking: fewer elements than the layout holds".into())
            })?;
            buf[at..at + n].copy_from_slice(src);
            pos += n;
        }
        Ok(())
    }

    /// Checks that a buffer of `len` elements holds the layout.
    pub(crate) fn fits(&self, len: usize, what: &str) -> Result<()> {
        if self.extent > len {
            return Err(Error::InvalidArgument(format!(
                "layout reaches element {} but the {what} has {len}",
                self.extent - 1
            )));
        }
        Ok(())
    }
}

fn checked(v: Option<usize>, what: &str) -> Result<usize> {
    v.ok_or_else(|| Error::InvalidArgument(format!("{what}: size overflows")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_indexed_subarray() {
        let v = Layout::vector(3, 2, 5).unwrap();
        assert_eq!(v.blocks(), &[(0, 2), (5, 2), (10, 2)]);
        assert_eq!((v.len(), v.extent()), (6, 12));
        // stride == blocklen is contiguous: one block.
        assert_eq!(Layout::vector(4, 3, 3).unwrap().blocks(), &[(0, 12)]);
        assert!(Layout::vector(2, 3, 2).is_err());
        let i = Layout::indexed(&[(7, 1), (0, 2), (2, 1), (9, 0)]).unwrap();
        assert_eq!(i.blocks(), &[(7, 1), (0, 3)]);
        assert_eq!((i.len(), i.extent()), (4, 8));
        let s = Layout::subarray(&[3, 4, 5], &[2, 2, 3], &[1, 1, 2]).unwrap();
        assert_eq!(s.blocks(), &[(27, 3), (32, 3), (47, 3), (52, 3)]);
        assert_eq!(s.len(), 12);
        assert!(Layout::subarray(&[4], &[3], &[2]).is_err());
        assert!(Layout::subarray(&[4, 4], &[1], &[0]).is_err());
        assert!(Layout::subarray(&[4, 4], &[0, 2], &[0, 0]).unwrap().is_empty());
        assert!(Layout::indexed(&[(usize::MAX, 2)]).is_err());
        assert!(Layout::vector(usize::MAX, 1, 2).is_err());
        assert_eq!(Layout::vector(0, 5, 1).unwrap().len(), 0);
        assert_eq!(Layout::vector(1, 5, 1).unwrap().blocks(), &[(0, 5)]);
    }

    #[test]
    fn runs_of_equal_blocks() {
        assert_eq!(stride_run(&[(0, 1), (10, 1), (20, 1), (30, 2)]), (3, 10));
        assert_eq!(stride_run(&[(5, 3)]), (1, 0));
        // Overlapping or shrinking blocks are no run.
        assert_eq!(stride_run(&[(0, 4), (2, 4)]).0, 1);
        assert_eq!(stride_run(&[(0, 2), (4, 2), (7, 2)]), (2, 4));
        let l = Layout::indexed(&[(1, 2), (6, 2), (11, 2), (20, 3), (29, 3), (60, 1)]).unwrap();
        let runs: Vec<_> = l.runs().iter().map(|r| (r.at, r.len, r.stride, r.count)).collect();
        assert_eq!(runs, vec![(1, 2, 5, 3), (20, 3, 9, 2), (60, 1, 1, 1)]);
        assert!(Layout::contiguous(0).runs().is_empty());
    }

    /// Packing walks runs; the result is the blocks' elements in order, for
    /// layouts of every shape (columns, tiles, mixed, single blocks).
    #[test]
    fn pack_by_runs_equals_block_by_block() {
        let buf: Vec<u64> = (0..4000).collect();
        let layouts = [
            Layout::vector(100, 1, 37).unwrap(),
            Layout::vector(30, 4, 9).unwrap(),
            Layout::subarray(&[20, 30, 6], &[3, 5, 2], &[1, 2, 3]).unwrap(),
            Layout::indexed(&[(3, 1), (5, 1), (7, 2), (100, 7), (200, 1), (203, 1)]).unwrap(),
            Layout::contiguous(17),
        ];
        for l in &layouts {
            let mut want = Vec::new();
            for &(at, n) in l.blocks() {
                want.extend_from_slice(&buf[at..at + n]);
            }
            assert_eq!(l.pack(&buf).unwrap(), want, "{l:?}");
            let mut bytes = vec![7u8; 3];
            l.pack_bytes(&buf, &mut bytes).unwrap();
            assert_eq!(&bytes[..3], &[7, 7, 7]);
            assert_eq!(&bytes[3..], bytemuck::cast_slice::<u64, u8>(&want), "{l:?}");
            let total: usize = l.runs().iter().map(|r| r.len * r.count).sum();
            assert_eq!(total, l.len());
        }
    }

    #[test]
    fn pack_unpack_round_trip() {
        let buf: Vec<u32> = (0..20).collect();
        let l = Layout::subarray(&[4, 5], &[2, 2], &[1, 3]).unwrap();
        let p = l.pack(&buf).unwrap();
        assert_eq!(p, vec![8, 9, 13, 14]);
        let mut back = vec![0u32; 20];
        l.unpack(&p, &mut back).unwrap();
        assert_eq!((back[8], back[9], back[13], back[14]), (8, 9, 13, 14));
        assert_eq!(back.iter().filter(|&&x| x != 0).count(), 4);
        assert!(l.pack(&buf[..14]).is_err());
    }
}
