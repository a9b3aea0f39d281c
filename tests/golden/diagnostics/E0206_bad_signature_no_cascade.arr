def split_heads(x: f32[t, dm], h: i32) -> f32[h, t, dm // h]:
    return transpose(reshape(x, (t, h, dm // h)), (1, 0, 2))

def attend(x: f32[4, 8]) -> f32[4, 8]:
    q = split_heads(x, 2)
    k = split_heads(x, 2)
    v = split_heads(x, 2)
    return x
