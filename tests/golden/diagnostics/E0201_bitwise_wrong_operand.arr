def f(flags: i32[n], x: f32[n]) -> i32[n]:
    return flags & x
